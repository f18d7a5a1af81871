package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// The in-flight contenders: a lease of rpm, tpm and one call in flight
// (an acquire that takes the slot in the item's current and next
// generation, a commit that gives both back: one conditional UpdateItem
// each), against a replay of those two writes one after the other. Both
// run only when -only names them.

const (
	inFlightName  = "in-flight"
	inFlightFloor = "replay-in-flight"
)

var (
	inFlightConsume = limiter.Consume{"rpm": 1, "tpm": 500, "calls": 1}
	inFlightLimits  = limiter.WithLimits(limiter.PerMinute("rpm", 1_000_000_000), limiter.PerMinute("tpm", 1_000_000_000),
		limiter.InFlight("calls", 1_000_000))
)

// inFlightLease is the in-flight contender's operation on entity id.
func inFlightLease(ctx context.Context, rl *limiter.RateLimiter, id string) error {
	l, err := rl.Acquire(ctx, id, resource, inFlightConsume, inFlightLimits)
	if err != nil {
		return err
	}
	return l.Commit(ctx)
}

// setupInFlight captures, for each worker, the acquire's and the
// commit's writes of a warm in-flight lease, on an item of its own that
// the limiter's contender does not write (its writes drop the
// generations that end, which the replay's writes name).
func (b *bench) setupInFlight(ctx context.Context, rl *limiter.RateLimiter, cp *capture, workers int) (err error) {
	if !b.wanted(inFlightName) && !b.wanted(inFlightFloor) {
		return nil
	}
	b.inFlight, err = captureTwo(workers, cp, "in-flight-replay", func(id string) error { return inFlightLease(ctx, rl, id) })
	return err
}

// inFlightContenders returns the in-flight contenders.
func (b *bench) inFlightContenders(rl *limiter.RateLimiter) []contender {
	return b.twoWriteContenders(inFlightName, inFlightFloor, b.inFlight, func(ctx context.Context, p [2]*dynamodb.UpdateItemInput) error {
		for _, in := range p {
			ddbschema.RenewWriteID(in.ExpressionAttributeValues)
			if _, err := b.client.UpdateItem(ctx, in); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context, w int) error { return inFlightLease(ctx, rl, entity("in-flight", w)) })
}
