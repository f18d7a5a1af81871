// Package crossbackend holds programs that the tests run unchanged on every
// backend (DynamoDB Local, the memory store, redis-server): a program
// written against the documented API ([ServeRequests]) and the cascade
// contention case ([CascadeContention]). It imports no backend: its tests
// open the repositories, so that a program that imports the limiter does
// not download the Redis client to tidy its module. It lives under cmd/
// with the other developer programs that import the limiter, below the
// internal packages the limiter itself uses.
package crossbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/zaelimiter/limiter"
)

// ServeRequests is a program written against the documented API: stored
// limits, an entity that cascades to its project, Acquire → Adjust →
// Commit, Do, and a refusal. It takes any Repository, so it runs unchanged
// on DynamoDB, on the memory store and on Redis (TestPortableProgram runs
// it on all three), and returns what it would print.
func ServeRequests(ctx context.Context, repo limiter.Repository, opts ...func(*limiter.Options)) ([]string, error) {
	rl := limiter.New(repo, opts...)
	var out []string
	if _, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj-1", Name: "Acme"}); err != nil {
		return nil, err
	}
	if _, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key-1", ParentID: "proj-1", Cascade: true}); err != nil {
		return nil, err
	}
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4"}, []limiter.Limit{
		limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 2_000),
	}); err != nil {
		return nil, err
	}
	for i, used := range []int64{700, 900, 100} {
		lease, err := rl.Acquire(ctx, "key-1", "gpt-4", limiter.Consume{"rpm": 1, "tpm": 500})
		if errors.Is(err, limiter.ErrRateLimited) {
			var rle *limiter.RateLimitExceededError
			errors.As(err, &rle)
			out = append(out, fmt.Sprintf("call %d refused by %s/%s, retry in %s", i, rle.Primary.EntityID, rle.Primary.LimitName, rle.RetryAfter))
			continue
		}
		if err != nil {
			return nil, err
		}
		lease.Adjust(limiter.Consume{"tpm": used - 500}) // the real token count
		if err := lease.Commit(ctx); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("call %d used %d tokens", i, used))
	}
	err := rl.Do(ctx, "key-1", "gpt-4", limiter.Consume{"rpm": 1, "tpm": 10}, func(ctx context.Context, l *limiter.Lease) error {
		return errors.New("LLM timeout") // rolled back
	})
	out = append(out, fmt.Sprintf("do: %v", err))
	avail, err := rl.Available(ctx, "proj-1", "gpt-4")
	if err != nil {
		return nil, err
	}
	return append(out, fmt.Sprintf("project has rpm=%d tpm=%d left", avail["rpm"], avail["tpm"])), nil
}
