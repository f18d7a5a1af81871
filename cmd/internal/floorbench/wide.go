package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter"
)

// The entity-wide contenders: an acquire of rpm and tpm on the resource
// and a usd budget on the entity's entity-wide bucket (AllResources),
// two conditional UpdateItems of the two items sent in parallel, against
// a replay of those two writes. Both run only when -only names them.

const (
	wideName   = "entity-wide"
	wideFloor  = "replay-wide"
	wideBudget = 1_000_000_000
)

var (
	wideConsume = limiter.Consume{"rpm": 1, "tpm": 500, "usd": 100}
	wideLimits  = limiter.WithEntityWideLimits(limiter.PerMinute("usd", wideBudget))
)

// wanted reports whether -only names a contender.
func (b *bench) wanted(name string) bool { return b.cfg.only != nil && b.cfg.only[name] }

// wideLease is the entity-wide contender's operation on entity id.
func wideLease(ctx context.Context, rl *limiter.RateLimiter, id string) error {
	l, err := rl.Acquire(ctx, id, resource, wideConsume, limits, wideLimits)
	if err != nil {
		return err
	}
	return l.Commit(ctx)
}

// setupWide captures, for each worker, the two writes of a warm
// entity-wide acquire (the third on its items: the first creates them).
func (b *bench) setupWide(ctx context.Context, rl *limiter.RateLimiter, cp *capture, workers int) (err error) {
	if !b.wanted(wideName) && !b.wanted(wideFloor) {
		return nil
	}
	b.wide, err = captureTwo(workers, cp, "wide", func(id string) error { return wideLease(ctx, rl, id) })
	return err
}

// wideContenders returns the entity-wide contenders.
func (b *bench) wideContenders(rl *limiter.RateLimiter) []contender {
	return b.twoWriteContenders(wideName, wideFloor, b.wide, b.replayPair,
		func(ctx context.Context, w int) error { return wideLease(ctx, rl, entity("wide", w)) })
}

// captureTwo runs lease three times on the entity of kind of each worker
// (the first creates its items) and captures the two UpdateItems of the
// third.
func captureTwo(workers int, cp *capture, kind string, lease func(id string) error) ([][2]*dynamodb.UpdateItemInput, error) {
	var out [][2]*dynamodb.UpdateItemInput
	for w := range workers {
		id := entity(kind, w)
		for range 2 {
			if err := lease(id); err != nil {
				return nil, fmt.Errorf("create the buckets of %s: %w", id, err)
			}
		}
		in, txs, err := cp.takeAll(func() error { return lease(id) })
		if err != nil || len(in) != 2 || len(txs) != 0 {
			return nil, fmt.Errorf("capture the writes of %s: %d updates, %d transactions, %v", id, len(in), len(txs), err)
		}
		out = append(out, [2]*dynamodb.UpdateItemInput{in[0], in[1]})
	}
	return out, nil
}

// twoWriteContenders returns a contender name running op against its
// floor replaying each worker's two captured writes; none when nothing
// was captured. The floor refills the items' write capacity first.
func (b *bench) twoWriteContenders(name, floor string, writes [][2]*dynamodb.UpdateItemInput,
	replay func(context.Context, [2]*dynamodb.UpdateItemInput) error, op func(context.Context, int) error,
) []contender {
	if len(writes) == 0 {
		return nil
	}
	return []contender{
		{name: floor, floor: floor, run: func(ctx context.Context, w int) error {
			return replay(ctx, writes[w])
		}, before: func(ctx context.Context, workers int) error {
			for _, p := range writes[:workers] {
				if err := b.refillWCU(ctx, p[0], p[1]); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: name, floor: floor, run: op},
	}
}
