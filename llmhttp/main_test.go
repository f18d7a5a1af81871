package llmhttp_test

import (
	"os"
	"testing"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/redisserver"
)

// TestMain starts DynamoDB Local and redis-server on first use, for the
// tests that run on them (the fleet, money and cost cap tests); the other
// tests run on the memory backend and start nothing.
func TestMain(m *testing.M) {
	os.Exit(redisserver.Main(redisserver.RunnerFunc(func() int { return ddblocal.Main(m) })))
}
