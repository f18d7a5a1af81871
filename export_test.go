package limiter

// NewMemoryStore returns an empty memorystore.Store. The package's
// internal tests cannot import memorystore (it imports this package), so
// memorystore_bridge_test.go, an external test file of the same test
// binary, sets it in its init.
var NewMemoryStore func() Repository

// newMemory returns an empty memory store for the internal tests.
func newMemory() Repository { return NewMemoryStore() }

// cacheStats picks one cache's statistics out of st.
func cacheStats(st Stats, c CacheName) CacheStats {
	switch c {
	case CacheConfigs:
		return st.Configs
	case CacheEntities:
		return st.Entities
	}
	return st.OverLimit
}
