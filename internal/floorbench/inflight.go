package main

import (
	"context"
	"fmt"

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

// setupInFlight captures, for each worker, the acquire's and the
// commit's writes of a warm in-flight lease, on an item of its own that
// the limiter's contender does not write (its writes drop the
// generations that end, which the replay's writes name).
func (b *bench) setupInFlight(ctx context.Context, rl *limiter.RateLimiter, cp *capture, workers int) error {
	if !b.wanted(inFlightName) && !b.wanted(inFlightFloor) {
		return nil
	}
	lease := func(id string) error {
		l, err := rl.Acquire(ctx, id, resource, inFlightConsume, inFlightLimits)
		if err != nil {
			return err
		}
		return l.Commit(ctx)
	}
	for w := range workers {
		id := entity("in-flight-replay", w)
		for range 2 {
			if err := lease(id); err != nil {
				return fmt.Errorf("create the bucket of %s: %w", id, err)
			}
		}
		in, txs, err := cp.takeAll(func() error { return lease(id) })
		if err != nil || len(in) != 2 || len(txs) != 0 {
			return fmt.Errorf("capture the writes of %s: %d updates, %d transactions, %v", id, len(in), len(txs), err)
		}
		b.inFlight = append(b.inFlight, [2]*dynamodb.UpdateItemInput{in[0], in[1]})
	}
	return nil
}

// inFlightContenders returns the in-flight contenders.
func (b *bench) inFlightContenders(rl *limiter.RateLimiter) []contender {
	if len(b.inFlight) == 0 {
		return nil
	}
	return []contender{
		{name: inFlightFloor, floor: inFlightFloor, run: func(ctx context.Context, w int) error {
			for _, in := range b.inFlight[w] {
				ddbschema.RenewWriteID(in.ExpressionAttributeValues)
				if _, err := b.client.UpdateItem(ctx, in); err != nil {
					return err
				}
			}
			return nil
		}, before: func(ctx context.Context, workers int) error {
			for _, p := range b.inFlight[:workers] {
				if err := b.refillWCU(ctx, p[0]); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: inFlightName, floor: inFlightFloor, run: func(ctx context.Context, w int) error {
			l, err := rl.Acquire(ctx, entity("in-flight", w), resource, inFlightConsume, inFlightLimits)
			if err != nil {
				return err
			}
			return l.Commit(ctx)
		}},
	}
}
