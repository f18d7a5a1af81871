package storetest

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/zaelimiter/limiter/store"
)

// The reference of the model test: an exact token bucket, written plainly
// with math/big, one operation at a time. Balances are rationals of
// millitokens and refill is continuous (ra × elapsed / rp, no rounding),
// so a correct limiter, which refills whole millitokens and never rounds in
// its own favour, never holds more than the reference.

// refParams are one limit's parameters: capacity and refill amount in
// millitokens, refill period in milliseconds.
type refParams struct{ capMilli, raMilli, rpMs int64 }

func paramsOf(l store.Limit) refParams {
	return refParams{capMilli: l.Capacity * 1000, raMilli: l.RefillAmount * 1000, rpMs: l.RefillPeriod.Milliseconds()}
}

func paramsOfState(s store.BucketState) refParams {
	return refParams{capMilli: s.CapacityMilli, raMilli: s.RefillAmountMilli, rpMs: s.RefillPeriodMs}
}

func (p refParams) String() string {
	return fmt.Sprintf("%d/%d per %dms", p.capMilli/1000, p.raMilli/1000, p.rpMs)
}

// earned is the whole millitokens a limit of p refills over elapsed
// milliseconds: floor(ra × elapsed / rp).
func (p refParams) earned(elapsedMs int64) *big.Int {
	if elapsedMs <= 0 {
		return new(big.Int)
	}
	x := new(big.Int).Mul(big.NewInt(elapsedMs), big.NewInt(p.raMilli))
	return x.Div(x, big.NewInt(p.rpMs))
}

// refBucket is one limit of one bucket item in the reference.
type refBucket struct {
	p   refParams
	bal *big.Rat // millitokens, exact
	at  int64    // bal is refilled up to this time, epoch ms
	// tc is the total consumed: admissions and adjustments, less the
	// refunds the refund rule gives. tcMax is the same without any
	// refund: a limiter that refunds less than the rule allows lies
	// between the two.
	tc, tcMax *big.Int
}

func newRefBucket(p refParams, now int64) *refBucket {
	return &refBucket{p: p, bal: new(big.Rat).SetInt64(p.capMilli), at: now, tc: new(big.Int), tcMax: new(big.Int)}
}

func (b *refBucket) clone() *refBucket {
	return &refBucket{p: b.p, bal: new(big.Rat).Set(b.bal), at: b.at, tc: new(big.Int).Set(b.tc), tcMax: new(big.Int).Set(b.tcMax)}
}

func (b *refBucket) capRat() *big.Rat { return new(big.Rat).SetInt64(b.p.capMilli) }

// refill brings the balance to now: ra × elapsed / rp more, at most the
// capacity (a balance at or above it stays as it is).
func (b *refBucket) refill(now int64) {
	if now <= b.at {
		return
	}
	if c := b.capRat(); b.bal.Cmp(c) < 0 {
		add := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(now-b.at), big.NewInt(b.p.raMilli)), big.NewInt(b.p.rpMs))
		b.bal.Add(b.bal, add)
		if b.bal.Cmp(c) > 0 {
			b.bal.Set(c)
		}
	}
	b.at = now
}

// change applies a limit change at now, as the library documents it: the
// bucket is refilled at the old rate up to the change, then capped to the
// new capacity.
func (b *refBucket) change(p refParams, now int64) {
	b.refill(now)
	b.p = p
	if c := b.capRat(); b.bal.Cmp(c) > 0 {
		b.bal.Set(c)
	}
}

// covers reports whether the balance (refilled to now by the caller) holds
// amountMilli.
func (b *refBucket) covers(amountMilli *big.Int) bool {
	return b.bal.Cmp(new(big.Rat).SetInt(amountMilli)) >= 0
}

// take subtracts amountMilli (which may exceed the balance: a debt) and
// counts it as consumed.
func (b *refBucket) take(amountMilli *big.Int) {
	b.bal.Sub(b.bal, new(big.Rat).SetInt(amountMilli))
	b.tc.Add(b.tc, amountMilli)
	b.tcMax.Add(b.tcMax, amountMilli)
}

// give adds a refund of gMilli, the balance capped at the capacity.
func (b *refBucket) give(gMilli *big.Int) {
	b.bal.Add(b.bal, new(big.Rat).SetInt(gMilli))
	if c := b.capRat(); b.bal.Cmp(c) > 0 {
		b.bal.Set(c)
	}
	b.tc.Sub(b.tc, gMilli)
}

// refItem is one bucket item of the reference: a bucket per limit name.
type refItem struct {
	key    store.BucketKey
	limits map[string]*refBucket
	// vanished is set when the store's item expired: the next acquire
	// creates it full, with the limits it resolves.
	vanished bool
}

func (it *refItem) names() []string {
	names := make([]string, 0, len(it.limits))
	for n := range it.limits {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// refModel is the reference's whole state: bucket items, stored limits and
// cascade parents.
type refModel struct {
	items   map[store.BucketKey]*refItem
	configs map[store.ConfigKey][]store.Limit
	parent  map[string]string // an entity's parent when it cascades
}

func newRefModel() *refModel {
	return &refModel{items: map[store.BucketKey]*refItem{}, configs: map[store.ConfigKey][]store.Limit{}, parent: map[string]string{}}
}

// resolve returns the stored limits that apply to (entity, resource): the
// first level with limits of entity, entity default, resource, system.
func (r *refModel) resolve(entity, resource string) []store.Limit {
	keys := []store.ConfigKey{store.EntityConfig(entity, resource), store.EntityConfig(entity, store.DefaultResource),
		store.ResourceConfig(resource), store.SystemConfig()}
	if resource == store.AllResources {
		// The entity-wide bucket: the entity's own config on it, then
		// the resource defaults of AllResources.
		keys = []store.ConfigKey{store.EntityConfig(entity, resource), store.ResourceConfig(resource)}
	}
	for _, k := range keys {
		if l := r.configs[k]; len(l) > 0 {
			return l
		}
	}
	return nil
}

// refEntry is one limit of one bucket item held by a lease in the
// reference, with the refund rule's bookkeeping.
type refEntry struct {
	key  store.BucketKey
	name string
	p    refParams // the limit as the lease's acquire resolved it
	t0   int64     // the acquire's time, epoch ms
	// initial is what the acquire took (durable); held is what the lease
	// holds: initial plus later positive adjustments less the refunds
	// given; pending is what Commit writes (positive adjustments less
	// refunds given) and pendingPos its positive part; taken is initial
	// plus every positive adjustment (the upper bound of Consumed).
	initial, held, pending, pendingPos, taken *big.Int
	refundAsked                               bool
}

func newRefEntry(key store.BucketKey, name string, p refParams, t0 int64, amountMilli *big.Int) *refEntry {
	return &refEntry{key: key, name: name, p: p, t0: t0,
		initial: new(big.Int).Set(amountMilli), held: new(big.Int).Set(amountMilli), pending: new(big.Int),
		pendingPos: new(big.Int), taken: new(big.Int).Set(amountMilli)}
}

// refundable is the refund rule: at now the entry gives back at most what
// it holds less what its limit refilled since the acquire,
// max(0, held − floor(ra × (now − t0) / rp)).
func (e *refEntry) refundable(held *big.Int, now int64) *big.Int {
	a := new(big.Int).Sub(held, e.p.earned(now-e.t0))
	if a.Sign() < 0 {
		a.SetInt64(0)
	}
	return a
}

// adjust records an adjustment of amountMilli at now (Adjust, Release,
// Consume): a positive one is taken in full, a refund is cut to the rule.
// It returns what the rule gives of a refund.
func (e *refEntry) adjust(amountMilli *big.Int, now int64) *big.Int {
	if amountMilli.Sign() >= 0 {
		e.held.Add(e.held, amountMilli)
		e.pending.Add(e.pending, amountMilli)
		e.pendingPos.Add(e.pendingPos, amountMilli)
		e.taken.Add(e.taken, amountMilli)
		return new(big.Int)
	}
	e.refundAsked = true
	g := new(big.Int).Neg(amountMilli)
	if a := e.refundable(e.held, now); g.Cmp(a) > 0 {
		g = a
	}
	e.held.Sub(e.held, g)
	e.pending.Sub(e.pending, g)
	return g
}

// commit writes the entry's pending change to its bucket at now.
func (e *refEntry) commit(b *refBucket, now int64) {
	b.refill(now)
	switch e.pending.Sign() {
	case 1:
		b.bal.Sub(b.bal, new(big.Rat).SetInt(e.pending))
		b.tc.Add(b.tc, e.pending)
	case -1:
		b.give(new(big.Int).Neg(e.pending))
	}
	b.tcMax.Add(b.tcMax, e.pendingPos)
}

// rollback gives back what the rule allows of the durable initial amount
// at now; local adjustments are dropped.
func (e *refEntry) rollback(b *refBucket, now int64) *big.Int {
	g := e.refundable(e.initial, now)
	b.refill(now)
	b.give(g)
	return g
}

// Helpers for the comparisons with the limiter's int64 values, which
// saturate where the reference does not.

var (
	minInt64 = big.NewInt(math.MinInt64)
	maxInt64 = big.NewInt(math.MaxInt64)
)

// clampInt64 is x saturated to the int64 range.
func clampInt64(x *big.Int) *big.Int {
	switch {
	case x.Cmp(minInt64) < 0:
		return new(big.Int).Set(minInt64)
	case x.Cmp(maxInt64) > 0:
		return new(big.Int).Set(maxInt64)
	}
	return x
}

// floorRat is floor(x).
func floorRat(x *big.Rat) *big.Int {
	q := new(big.Int)
	q.Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return q
}

// ratString prints a millitoken rational as tokens (rounded to four
// decimals for display).
func ratString(x *big.Rat) string {
	s := new(big.Rat).Quo(x, big.NewRat(1000, 1)).FloatString(4)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// milliString prints millitokens as tokens.
func milliString(x *big.Int) string {
	q, r := new(big.Int).QuoRem(x, big.NewInt(1000), new(big.Int))
	if r.Sign() == 0 {
		return q.String()
	}
	s := fmt.Sprintf("%s.%03d", q.String(), new(big.Int).Abs(r).Int64())
	if x.Sign() < 0 && q.Sign() == 0 {
		s = "-" + s
	}
	return strings.TrimRight(s, "0")
}

// implView is a stored limit state refilled to now as the limiter
// computes it: floor(ra × elapsed / rp) whole millitokens more, at most the
// capacity, or unchanged when that is zero.
func implView(s store.BucketState, now int64) *big.Int {
	tk := big.NewInt(s.TokensMilli)
	if now <= s.LastRefillMs || s.RefillPeriodMs <= 0 {
		return tk
	}
	add := new(big.Int).Mul(big.NewInt(now-s.LastRefillMs), big.NewInt(s.RefillAmountMilli))
	add.Div(add, big.NewInt(s.RefillPeriodMs))
	if add.Sign() == 0 {
		return tk
	}
	tk.Add(tk, add)
	if c := big.NewInt(s.CapacityMilli); tk.Cmp(c) > 0 {
		tk = c
	}
	return tk
}
