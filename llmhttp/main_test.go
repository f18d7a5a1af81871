package llmhttp_test

import (
	"os"
	"testing"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// TestMain starts DynamoDB Local for the fleet test on first use (the other
// tests run on the memory backend and start nothing).
func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
