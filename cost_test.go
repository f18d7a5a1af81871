package limiter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// returnCapacity asks DynamoDB for the consumed capacity of every read and
// write (table plus indexes), for the recorder to collect.
func returnCapacity() func(*dynamodb.Options) {
	return hook(func(op string, params any) error {
		switch in := params.(type) {
		case *dynamodb.GetItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.BatchGetItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.PutItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.UpdateItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.TransactWriteItemsInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		}
		return nil
	})
}

// TestCapacityUnits asserts the capacity units DynamoDB Local reports per
// operation (ReturnConsumedCapacity TOTAL: table plus GSIs). Bucket items
// are projected into GSI2 (ALL), so every bucket update costs 1 WCU on the
// table and 1 on GSI2; a create also writes GSI3 and GSI4 (KEYS_ONLY).
// DynamoDB Local does not apply real DynamoDB's 2× factor to transactions.
// Refused conditional writes report nothing (real DynamoDB charges 1 WCU).
func TestCapacityUnits(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	spec := New(env.withClient(returnCapacity()), func(o *Options) { o.Clock = env.clock.now })
	slow := New(env.withClient(returnCapacity()), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	spec.Admin().CreateEntity(ctx, Entity{ID: "P"})
	spec.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	slow.Admin().Entity(ctx, "C") // each limiter has its own entity cache
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))

	// summary lists the calls as "Op:units", failed calls as "Op!".
	summary := func() string {
		var parts []string
		for _, c := range env.rec.Calls() {
			if c.Failed() {
				parts = append(parts, c.Op+"!")
				continue
			}
			parts = append(parts, fmt.Sprintf("%s:%g", c.Op, c.Capacity.Units))
		}
		return strings.Join(parts, " ")
	}
	for _, row := range []struct {
		name string
		want string
		fn   func()
	}{
		{"first acquire, new bucket (the entity read first)", "BatchGetItem:0 PutItem:4", func() {
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1}, lim))
		}},
		{"speculative success", "UpdateItem:2", func() {
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1}, lim))
		}},
		{"read-then-write acquire", "BatchGetItem:0.5 UpdateItem:2", func() {
			mustCommit(t, mustAcquire(t, slow, "solo", "api", Consume{"rpm": 1}, lim))
		}},
		{"commit with adjustment", "UpdateItem:2", func() {
			l := mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1}, lim)
			env.rec.Reset()
			l.Adjust(Consume{"tpm": 5})
			mustCommit(t, l)
		}},
		{"rollback", "UpdateItem:2", func() {
			l := mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1}, lim)
			env.rec.Reset()
			l.Rollback(ctx)
		}},
		{"cascade, new buckets", "GetItem:1 GetItem:1 BatchGetItem:1 TransactWriteItems:8", func() {
			mustCommit(t, mustAcquire(t, spec, "C", "api", Consume{"rpm": 1}, lim))
		}},
		{"cascade speculative success", "UpdateItem:2 UpdateItem:2", func() {
			mustCommit(t, mustAcquire(t, spec, "C", "api", Consume{"rpm": 1}, lim))
		}},
		{"cascade read-then-write", "BatchGetItem:2 TransactWriteItems:4", func() {
			mustCommit(t, mustAcquire(t, slow, "C", "api", Consume{"rpm": 1}, lim))
		}},
		// An entity-wide budget beside the resource's limits: two items,
		// one conditional UpdateItem each (a transaction of the two costs
		// twice their units on real DynamoDB).
		{"entity-wide budget, speculative", "UpdateItem:2 UpdateItem:2", func() {
			wide := WithEntityWideLimits(PerDay("usd", 1_000_000))
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1, "usd": 1}, lim, wide))
			env.rec.Reset()
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1, "usd": 1}, lim, wide))
		}},
		{"available", "GetItem:0.5", func() {
			_, err := spec.Available(ctx, "solo", "api", lim)
			require.NoError(t, err)
		}},
		{"fast rejection", "UpdateItem!", func() {
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 90}, lim))
			env.rec.Reset()
			_, err := spec.Acquire(ctx, "solo", "api", Consume{"rpm": 50}, lim)
			require.Error(t, err, "not rejected")
		}},
		{"speculative fallback, refill helps", "UpdateItem! BatchGetItem:0.5 UpdateItem:2", func() {
			env.clock.advance(30 * time.Second)
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 40}, lim))
		}},
		// Full again: the refilled state in one write (its item as the
		// last write returned it is kept), the same capacity units.
		{"speculative, bucket full", "UpdateItem:2", func() {
			env.clock.advance(time.Minute)
			mustCommit(t, mustAcquire(t, spec, "solo", "api", Consume{"rpm": 1}, lim))
		}},
	} {
		env.rec.Reset()
		row.fn()
		got := summary()
		assert.Equal(t, row.want, got, "%s: %q, want %q", row.name, got, row.want)
	}
}
