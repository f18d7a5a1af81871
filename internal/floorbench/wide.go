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

// setupWide captures, for each worker, the two writes of a warm
// entity-wide acquire (the third on its items: the first creates them).
func (b *bench) setupWide(ctx context.Context, rl *limiter.RateLimiter, cp *capture, workers int) error {
	if !b.wanted(wideName) && !b.wanted(wideFloor) {
		return nil
	}
	acquire := func(id string) error {
		l, err := rl.Acquire(ctx, id, resource, wideConsume, limits, wideLimits)
		if err != nil {
			return err
		}
		return l.Commit(ctx)
	}
	for w := range workers {
		id := entity("wide", w)
		for range 2 {
			if err := acquire(id); err != nil {
				return fmt.Errorf("create the buckets of %s: %w", id, err)
			}
		}
		in, txs, err := cp.takeAll(func() error { return acquire(id) })
		if err != nil || len(in) != 2 || len(txs) != 0 {
			return fmt.Errorf("capture the writes of %s: %d updates, %d transactions, %v", id, len(in), len(txs), err)
		}
		b.wide = append(b.wide, [2]*dynamodb.UpdateItemInput{in[0], in[1]})
	}
	return nil
}

// wideContenders returns the entity-wide contenders.
func (b *bench) wideContenders(rl *limiter.RateLimiter) []contender {
	if len(b.wide) == 0 {
		return nil
	}
	return []contender{
		{name: wideFloor, floor: wideFloor, run: func(ctx context.Context, w int) error {
			return b.replayPair(ctx, b.wide[w])
		}, before: func(ctx context.Context, workers int) error {
			for _, p := range b.wide[:workers] {
				if err := b.refillWCU(ctx, p[0], p[1]); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: wideName, floor: wideFloor, run: func(ctx context.Context, w int) error {
			l, err := rl.Acquire(ctx, entity("wide", w), resource, wideConsume, limits, wideLimits)
			if err != nil {
				return err
			}
			return l.Commit(ctx)
		}},
	}
}
