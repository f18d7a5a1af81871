package storetest

import (
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// toStoreLimits returns ls as the backends' type.
func toStoreLimits(ls []limiter.Limit) []store.Limit {
	out := make([]store.Limit, len(ls))
	for i, l := range ls {
		out[i] = store.Limit(l)
	}
	return out
}

// toCallerLimits returns ls as the limiter's callers' type.
func toCallerLimits(ls []store.Limit) []limiter.Limit {
	out := make([]limiter.Limit, len(ls))
	for i, l := range ls {
		out[i] = limiter.Limit(l)
	}
	return out
}
