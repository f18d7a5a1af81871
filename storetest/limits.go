package storetest

import (
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// toCallerLimits returns ls as the limiter's callers' type.
func toCallerLimits(ls []store.Limit) []limiter.Limit {
	out := make([]limiter.Limit, len(ls))
	for i, l := range ls {
		out[i] = limiter.Limit(l)
	}
	return out
}
