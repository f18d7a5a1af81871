package loadtest

import (
	"os"
	"testing"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// ddblocalMain starts one DynamoDB Local for the package's tests.
func ddblocalMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
