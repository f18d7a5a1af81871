package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Wait jitter (see [RateLimiter.Wait]): each sleep is the retry-after plus a
// random extra of up to a tenth of it, at most maxWaitJitter. A refused
// acquire with no retry-after (a lost race) sleeps minWaitSleep.
const (
	maxWaitJitter = 10 * time.Millisecond
	minWaitSleep  = time.Millisecond
)

// Wait is Acquire that blocks until the request fits instead of failing
// with a rate-limit error: the idiom of golang.org/x/time/rate's Wait, for
// batch jobs that would rather wait than drop work. Each time a limit
// refuses, Wait sleeps for the refusal's RetryAfter — the time the bucket
// math computed until the missing tokens have refilled — plus a small jitter,
// then tries again, and returns the lease as soon as an Acquire succeeds.
// Finish the lease as after Acquire (Commit or Rollback).
//
// Wait returns without waiting:
//
//   - ctx's error, unwrapped (errors.Is(err, context.Canceled) or
//     context.DeadlineExceeded), when ctx is done before or during a sleep;
//   - an error matching both [ErrRateLimited] (errors.As finds the
//     *[RateLimitExceededError]) and [context.DeadlineExceeded] when ctx's
//     deadline comes before the computed retry time: waiting could not
//     succeed, so Wait fails at once instead of sleeping until the deadline;
//   - the *[RateLimitExceededError] itself when the request can never fit:
//     a violated limit's capacity is smaller than the amount requested, or
//     the limit does not refill;
//   - every other error of Acquire (validation, unavailable in block mode)
//     as Acquire returns it. In allow mode an unavailable backend gives a
//     no-op lease, as with Acquire.
//
// Fairness and jitter: Wait is not a queue. Waiters on one bucket retry
// independently when their computed time comes, and whichever Acquire
// reaches the store first wins the refilled tokens; the others are refused
// again with a fresh retry-after and sleep again. No waiter is served before
// the tokens exist, so Wait never over-admits, but a waiter can be overtaken
// by later ones. Each sleep is lengthened by a random jitter of up to 10% of
// the retry-after, at most 10 ms, so that waiters refused together do not
// all hit the store in the same millisecond. With N waiters on a drained
// bucket each refill costs up to N acquire attempts (each a store round
// trip); to wait on one hot key from many goroutines, put an in-process
// limiter or semaphore in front of Wait.
func (rl *RateLimiter) Wait(ctx context.Context, entityID, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lease, err := rl.Acquire(ctx, entityID, resource, consume, opts...)
		var rle *RateLimitExceededError
		if err == nil || !errors.As(err, &rle) || rle.NeverFits() {
			return lease, err
		}
		d := rl.waitDuration(rle.RetryAfter)
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left < rle.RetryAfter {
				return nil, fmt.Errorf("wait %s/%s: retry after %v is past the context deadline: %w: %w",
					entityID, resource, rle.RetryAfter, context.DeadlineExceeded, err)
			}
			if d > left {
				d = rle.RetryAfter // no jitter past the deadline
			}
		}
		if rl.obs.logging(ctx, slog.LevelDebug) {
			rl.obs.log.LogAttrs(ctx, slog.LevelDebug, "limiter: wait",
				slog.String("entity_id", entityID), slog.String("resource", resource),
				slog.String("limit", rle.Primary.LimitName), slog.Duration("retry_after", rle.RetryAfter),
				slog.Duration("sleep", d))
		}
		if err := rl.sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// waitDuration is the sleep before the next attempt of Wait: retryAfter
// (at least minWaitSleep) plus a random jitter of up to
// min(retryAfter/10, maxWaitJitter).
func (rl *RateLimiter) waitDuration(retryAfter time.Duration) time.Duration {
	d := max(retryAfter, minWaitSleep)
	j := min(d/10, maxWaitJitter)
	if us := int(j / time.Microsecond); us > 0 {
		d += time.Duration(rl.intN(us+1)) * time.Microsecond
	}
	return d
}
