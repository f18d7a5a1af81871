package llmhttp_test

import (
	"os"
	"testing"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// TestMain starts DynamoDB Local on first use, for the tests that run on
// it (the fleet and money tests); the other tests run on the memory
// backend and start nothing. The tests on redis-server are in
// llmhttp/internal/costcap, so that the Redis backend is no test
// dependency of this package (go mod tidy loads the tests of every
// package a program imports).
func TestMain(m *testing.M) {
	os.Exit(ddblocal.Main(m))
}
