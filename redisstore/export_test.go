package redisstore

import (
	"context"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// BucketKeyName returns the Redis key of a bucket item.
func (s *Store) BucketKeyName(k store.BucketKey) string { return s.keys.bucket(k) }

// BatchStats returns the number of consume scripts sent for queued
// requests and the number of requests in them.
func (s *Store) BatchStats() (scripts, requests int64) {
	return s.batches.Load(), s.batchedConsume.Load()
}

// LibraryName returns the name of the store's function library.
func LibraryName() string { return library.name }

// AllowBatches returns the number of Allow calls sent for queued requests.
func (s *Store) AllowBatches() int64 { return s.allowBatches.Load() }

// ParseStored is the parser of the numbers the store wrote.
func ParseStored(s string) int64 { return atoi(s) }

// LimitArgs returns the consume function's arguments of l: its field name
// and parameters.
func (s *Store) LimitArgs(l limiter.Limit) (field, params string) {
	la := s.limitArgsOf(store.Limit(l))
	return la.name.(string), la.params.(string)
}

// ConsumeEach runs the batched consume (consume_each: each request decided
// on its own, in order) on reqs, whose items share a slot.
func (s *Store) ConsumeEach(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	return s.consumeEach(ctx, reqs)
}

// ConsumeArgs returns the arguments of a consume call on reqs after its
// write identifier (see lua/consume_lib.lua), each as the text sent.
func (s *Store) ConsumeArgs(reqs []store.SpeculativeRequest) []string {
	full := s.consumeArgs(reqs)
	var out []string
	for _, a := range full[3+len(reqs)+2:] {
		switch v := a.(type) {
		case string:
			out = append(out, v)
		case *string:
			out = append(out, *v)
		case *int64:
			out = append(out, itoa(*v))
		case int:
			out = append(out, itoa(int64(v)))
		default:
			panic(a)
		}
	}
	return out
}
