package limiter

import (
	"testing"
	"time"
)

// TestCallCountsInFlight: the DynamoDB round trips of an acquire of rpm,
// tpm and 1 call in flight: the rolling bucket and the slot buckets of two
// generations in one TransactWriteItems (on the speculative path, once the
// buckets exist, that one call and nothing else); its commit writes the
// adjustment and the give-back of both generations' slots, one UpdateItem
// per item, as does its rollback. (The first acquire also reads the
// entity record, GetItem, for its cascade.)
func TestCallCountsInFlight(t *testing.T) {
	for _, spec := range []bool{false, true} {
		t.Run(map[bool]string{false: "read-then-write", true: "speculative"}[spec], func(t *testing.T) {
			env := newTestEnv(t)
			env.spec = spec
			rl := env.limiter(WithSlotTTL(time.Hour))
			defer func() { _ = rl.Close() }()
			lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000), InFlight("calls", 8))
			call := Consume{"rpm": 1, "tpm": 10, "calls": 1}
			check := env.callChecker(t)
			var l *Lease
			check("acquire (new buckets)", map[bool]string{
				false: "GetItem, BatchGetItem[4], TransactWriteItems[3]",
				true:  "GetItem, BatchGetItem[3], BatchGetItem[4], TransactWriteItems[3]",
			}[spec], func() { l = mustAcquire(t, rl, "solo", "api", call, lim) })
			check("commit with adjustment", "UpdateItem, UpdateItem, UpdateItem", func() {
				if err := l.Adjust(Consume{"tpm": 5}); err != nil {
					t.Fatal(err)
				}
				mustCommit(t, l)
			})
			check("acquire (existing buckets)", map[bool]string{false: "BatchGetItem[4], TransactWriteItems[3]", true: "TransactWriteItems[3]"}[spec], func() { l = mustAcquire(t, rl, "solo", "api", call, lim) })
			check("rollback", "UpdateItem, UpdateItem, UpdateItem", func() {
				if err := l.Rollback(env.ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
