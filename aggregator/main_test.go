package aggregator

import (
	"os"
	"testing"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// TestMain starts one DynamoDB Local for the package, on first use (see
// internal/ddblocal).
func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
