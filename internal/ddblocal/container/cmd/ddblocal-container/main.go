// Command ddblocal-container starts DynamoDB Local in a Docker container for
// the test harness of package ddblocal, writes one line (the endpoint, or
// why there is none), and terminates the container when its standard input
// closes. `make ddblocal-container` builds it into .cache/bin; the harness
// runs it from there (or from $ZAEL_DYNAMODB_CONTAINER_HELPER).
package main

import (
	"os"

	"github.com/zaelimiter/limiter/internal/ddblocal/container"
)

func main() { os.Exit(container.Main()) }
