// Layer 4, mechanics: Wait, the Acquire that blocks until the request
// fits, with the queue of Waits for the slots of in-flight limits.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// Wait jitter (see [RateLimiter.Wait]): each sleep is the retry-after plus a
// random extra of up to a tenth of it, at most maxWaitJitter, and at least
// minWaitSleep.
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
//   - every other error of Acquire (validation, unavailable in block mode,
//     [ErrClosed]) as Acquire returns it. In allow mode an unavailable
//     backend gives a no-op lease, as with Acquire. [RateLimiter.Close]
//     wakes a sleeping Wait, which returns [ErrClosed].
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
//
// Waits refused by an in-flight limit alone are the exception: a slot
// comes back when a lease ends, and the Waits of one limiter queue per
// item; a slot a lease of the limiter gives back goes to the first of
// them at once, and together they poll about as often as one would. On
// DynamoDB such a Wait polls by reading the items it takes slots of (one
// GetItem, or one BatchGetItem for a cascade, shared with the limiter's
// other Waits for 20 ms) and writes only when they show a slot free, no
// more Waits at once than the slots shown free (and one every 5 s all the
// same, so that a raised capacity is found); a Wait that finds others of
// the limiter queued for the same slots polls behind them instead of
// writing at once.
func (rl *RateLimiter) Wait(ctx context.Context, entityID, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	var (
		err   error                   // the last refusal
		rle   *RateLimitExceededError // err as such
		force bool                    // the next poll writes
	)
	// reads is set while the request waits for slots and polls by reading
	// first (see slotsLookFree); a Wait that finds the Waits of this
	// limiter queued for the same slots queues behind them.
	reads := rl.queuedSlotReads(entityID, resource, consume, opts)
	since := time.Now() // the Wait's age orders the hand-off of slots
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		free, claimed := force, []slotRead(nil)
		if !free {
			free, claimed = rl.slotPollWrites(ctx, reads)
		}
		if free {
			force = false
			var lease *Lease
			lease, err = rl.Acquire(ctx, entityID, resource, consume, opts...)
			rl.slotViews.unclaim(claimed)
			if err == nil || !errors.As(err, &rle) || rle.NeverFits() {
				return lease, err
			}
			reads = rl.slotReads(entityID, resource, rle, opts)
		}
		retryAfter, keys := slotWaitPoll, []slotWaitKey(nil)
		if rle != nil {
			retryAfter, keys = rle.RetryAfter, slotWaitKeys(rle)
		} else {
			keys = slotReadKeys(reads)
		}
		d := rl.waitDuration(retryAfter)
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left < retryAfter && rle == nil {
				force = true // queued without a refusal: the acquire decides
				continue
			}
			if left < retryAfter {
				return nil, fmt.Errorf("wait %s/%s: retry after %v is past the context deadline: %w: %w",
					entityID, resource, rle.RetryAfter, context.DeadlineExceeded, err)
			}
			if d > left {
				d = retryAfter // no jitter past the deadline
			}
		}
		if rle != nil && rl.obs.logging(ctx, slog.LevelDebug) {
			rl.obs.log.LogAttrs(ctx, slog.LevelDebug, "limiter: wait",
				slog.String("entity_id", entityID), slog.String("resource", resource),
				slog.String("limit", rle.Primary.LimitName), slog.Duration("retry_after", rle.RetryAfter),
				slog.Duration("sleep", d))
		}
		if keys != nil {
			gift, err := rl.waitForSlot(ctx, keys, d, rl.slotWant(rle, reads, opts), since)
			if err != nil {
				return nil, err
			}
			if gift != nil {
				// A lease of this limiter handed its slots to this Wait.
				var lease *Lease
				lease, err = rl.acquireGift(ctx, entityID, resource, consume, opts, gift)
				if err == nil || !errors.As(err, &rle) || rle.NeverFits() {
					return lease, err
				}
				reads = rl.slotReads(entityID, resource, rle, opts)
			}
		} else if err := rl.sleepUnlessClosed(ctx, d); err != nil {
			return nil, err
		}
	}
}

// slotWaitKeys returns the items of rle's violations when every one is an
// in-flight limit's (a slot comes back when a lease ends, which a Wait
// can learn of in this process), else nil.
func slotWaitKeys(rle *RateLimitExceededError) []slotWaitKey {
	var keys []slotWaitKey
	for _, v := range rle.Violations {
		if !store.Limit(v.Limit).IsInFlight() {
			return nil
		}
		k := slotWaitKey{v.EntityID, v.Resource}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// waitForSlot sleeps a Wait refused for want of a slot of keys' items:
// until a lease of this process gives one back (release), or until its
// poll, d (slotWaitPoll and its jitter) times the number of waiters of
// the busiest item, at most maxSlotPoll, so that the waiters of one
// process poll the store about as often as one would. It returns nil when
// woken or when the poll is due.
func (rl *RateLimiter) waitForSlot(ctx context.Context, keys []slotWaitKey, d time.Duration, want []slotRead, since time.Time) (*slotGift, error) {
	sctx, wake := context.WithCancel(ctx)
	defer wake()
	w := &slotWaiter{wake: wake, want: want, since: since}
	n := rl.slotWaits.join(w, keys)
	d = min(d*time.Duration(n), max(d, maxSlotPoll))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	err := rl.sleepUnlessClosed(sctx, d)
	gift, _ := rl.slotWaits.leave(w, keys).(*slotGift)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil && !errors.Is(err, ErrClosed) {
		return gift, nil // woken by a slot given back, or handed
	}
	if err != nil {
		rl.giveBackGift(ctx, gift)
		return nil, err
	}
	return gift, nil
}

// acquireGift is the acquire of a Wait handed the slots of g: its plan
// takes them when it charges exactly them, and its lease then holds them
// as its own (adoptGift). Slots its plan did not take, or that its
// acquire could not use (refused, failed, a no-op lease), are given back
// to the store.
func (rl *RateLimiter) acquireGift(ctx context.Context, entityID, resource string, consume Consume, opts []AcquireOption, g *slotGift) (*Lease, error) {
	lease, err := rl.acquireMetered(ctx, entityID, resource, consume, opts, g)
	if err != nil || !rl.adoptGift(lease, g) {
		rl.giveBackGift(ctx, g)
	}
	return lease, err
}

// slotWant returns the slots a Wait refused with rle (or polling for
// reads) takes, so that a lease of the limiter may hand it exactly those
// (slothandoff.go): the in-flight limits of every item the request takes
// slots of, with their amounts. nil (no handed slots) for a Wait with
// options or not refused for want of slots alone.
func (rl *RateLimiter) slotWant(rle *RateLimitExceededError, reads []slotRead, opts []AcquireOption) []slotRead {
	if len(opts) > 0 {
		return nil
	}
	if rle == nil || slotWaitKeys(rle) == nil {
		return reads
	}
	return inFlightRequested(rle)
}

// sleepUnlessClosed is rl.sleep, cut short by Close with ErrClosed.
func (rl *RateLimiter) sleepUnlessClosed(ctx context.Context, d time.Duration) error {
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(rl.gate.life, cancel)
	err := rl.sleep(sctx, d)
	stop()
	cancel()
	if rl.gate.life.Err() != nil && ctx.Err() == nil {
		return ErrClosed
	}
	return err
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
