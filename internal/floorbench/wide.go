package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// The entity-wide contenders: an acquire of rpm and tpm on the resource
// and a usd budget on the entity's entity-wide bucket (AllResources),
// one TransactWriteItems of the two items, against a replay of that
// transaction. Both run only when -only names them.

const (
	wideName   = "entity-wide"
	wideFloor  = "replay-wide"
	wideBudget = 1_000_000_000
)

var (
	wideConsume = limiter.Consume{"rpm": 1, "tpm": 500, "usd": 100}
	wideLimits  = limiter.WithEntityWideLimits(limiter.PerMinute("usd", wideBudget))
)

// wideTokens numbers the replayed transactions' idempotency tokens.
var wideTokens atomic.Int64

// wanted reports whether -only names a contender.
func (b *bench) wanted(name string) bool { return b.cfg.only != nil && b.cfg.only[name] }

// setupWide captures, for each worker, the transaction of a warm
// entity-wide acquire (the third on its items: the first creates them,
// the second reads the one its fast path does not keep).
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
		if err != nil || len(in) != 0 || len(txs) != 1 {
			return fmt.Errorf("capture the transaction of %s: %d updates, %d transactions, %v", id, len(in), len(txs), err)
		}
		b.wide = append(b.wide, txs[0])
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
			in := b.wide[w]
			for _, it := range in.TransactItems {
				if it.Update != nil {
					ddbschema.RenewWriteID(it.Update.ExpressionAttributeValues) // a new write, as the limiter's
				}
			}
			in.ClientRequestToken = aws.String("floorbench-wide-" + strconv.FormatInt(wideTokens.Add(1), 10))
			_, err := b.client.TransactWriteItems(ctx, in)
			return err
		}, before: func(ctx context.Context, workers int) error {
			for _, in := range b.wide[:workers] {
				for _, it := range in.TransactItems {
					if it.Update == nil {
						continue
					}
					u := &dynamodb.UpdateItemInput{TableName: it.Update.TableName, Key: it.Update.Key}
					if err := b.refillWCU(ctx, u); err != nil {
						return err
					}
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
