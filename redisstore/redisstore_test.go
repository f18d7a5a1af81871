package redisstore_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/storetest"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Main(m)) }

// newStore returns a store on the package's standalone server, in a
// namespace of its own.
func newStore(t testing.TB) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
	require.NoError(t, err)
	return s
}

// newClusterStore returns a store on the package's three-master cluster.
func newClusterStore(t testing.TB) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisserver.ClusterClient(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
	require.NoError(t, err)
	return s
}

// TestConformance runs the backend conformance suite on a standalone
// redis-server.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) limiter.Repository { return newStore(t) })
}

// TestConformanceCluster runs the suite on a three-master Redis Cluster.
func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, func(t *testing.T) limiter.Repository { return newClusterStore(t) })
}

// TestConformanceClusterSingleSlot runs the suite on the Cluster with
// every bucket item of the namespace in one slot (Options.SingleSlot):
// every batch is one script there.
func TestConformanceClusterSingleSlot(t *testing.T) {
	storetest.Run(t, func(t *testing.T) limiter.Repository {
		t.Helper()
		s, err := redisstore.New(redisserver.ClusterClient(t), func(o *redisstore.Options) {
			o.Prefix, o.SingleSlot = redisserver.Prefix(t), true
		})
		require.NoError(t, err)
		return s
	})
}

// TestConformanceScripts runs the suite on a standalone redis-server with
// the store's Lua code as scripts (EVALSHA), the fallback for servers
// without functions.
func TestConformanceScripts(t *testing.T) {
	storetest.Run(t, func(t *testing.T) limiter.Repository {
		t.Helper()
		s, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) {
			o.Prefix, o.DisableFunctions = redisserver.Prefix(t), true
		})
		require.NoError(t, err)
		return s
	})
}
