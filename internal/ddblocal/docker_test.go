package ddblocal

import (
	"testing"
	"time"
)

// TestDockerCheckBounded runs the Docker health check. Without a daemon it
// must fail (Start then falls through to the jar); either way it reports how
// long it took, which is bounded by dockerCheckTimeout.
func TestDockerCheckBounded(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	err := dockerHealthy(t.Context(), dockerCheckTimeout)
	t.Logf("dockerHealthy = %v after %v", err, time.Since(begin))
}
