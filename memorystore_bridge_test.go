package limiter_test

import (
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

func init() {
	limiter.NewMemoryStore = func() limiter.Repository { return memorystore.New() }
}
