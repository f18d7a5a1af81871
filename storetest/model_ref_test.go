package storetest

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// The reference of the model test, checked by hand on the issue's
// numbers: if it were wrong, the model test would accept a wrong limiter
// or fail a right one.

func ratOf(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	require.True(t, ok, "rational %q", s)
	return r
}

func TestRefBucket(t *testing.T) {
	perMin100 := refParams{capMilli: 100_000, raMilli: 100_000, rpMs: 60_000}
	b := newRefBucket(perMin100, 0)
	b.take(milli(99))
	b.refill(250) // 250 ms at 100/min: 416⅔ millitokens
	assert.Equal(t, ratOf(t, "4250/3").String(), b.bal.String())
	b.refill(60_000)
	assert.Equal(t, "100000/1", b.bal.String(), "capped at the capacity")
	b.take(milli(150))
	b.refill(60_000 + 30_000)
	assert.Equal(t, "0/1", b.bal.String(), "a debt refills at the rate")
	assert.Equal(t, "249000", b.tc.String())

	// A limit change: refilled at the old rate up to it, then capped.
	b = newRefBucket(perMin100, 0)
	b.take(milli(50))
	b.change(refParams{capMilli: 20_000, raMilli: 20_000, rpMs: 60_000}, 6000) // 50 + 10, capped at 20
	assert.Equal(t, "20000/1", b.bal.String())
	b.change(perMin100, 9000) // full at 20 until the raise: no more
	assert.Equal(t, "20000/1", b.bal.String())
	b.take(milli(20))
	b.change(refParams{capMilli: 20_000, raMilli: 20_000, rpMs: 60_000}, 9000)
	b.change(perMin100, 12_000) // 3 s at 20/min: 1
	assert.Equal(t, "1000/1", b.bal.String())

	// A refund is capped at the capacity, and counted in full.
	b.give(milli(500))
	assert.Equal(t, "100000/1", b.bal.String())
	assert.Equal(t, "-430000", b.tc.String())
	assert.True(t, b.covers(milli(100)))
	assert.False(t, b.covers(milli(101)))
}

func TestRefundRule(t *testing.T) {
	perMin100 := refParams{capMilli: 100_000, raMilli: 100_000, rpMs: 60_000}
	key := store.BucketKey{EntityID: "k", Resource: "r"}

	// A lease of 500 refunds 1,000,500 at once: it gives 500.
	e := newRefEntry(key, "tpm", refParams{capMilli: 10_000_000, raMilli: 10_000_000, rpMs: 60_000}, 0, milli(500))
	assert.Equal(t, "500000", e.adjust(milli(-1_000_500), 0).String())
	assert.Equal(t, "0", e.held.String())
	assert.Equal(t, "-500000", e.pending.String())

	// A lease of 80 of 100/min refunds 80 six seconds later: 10 refilled
	// meanwhile, so it gives 70; a later positive adjustment is held too.
	e = newRefEntry(key, "rpm", perMin100, 0, milli(80))
	assert.Equal(t, "70000", e.adjust(milli(-80), 6000).String())
	e.adjust(milli(30), 6000)
	assert.Equal(t, "40000", e.held.String())
	assert.Equal(t, "30000", e.adjust(milli(-1000), 6000).String(), "held 40 less the 10 refilled")

	// A rollback a minute after taking the whole bucket gives nothing.
	b := newRefBucket(perMin100, 0)
	b.take(milli(100))
	e = newRefEntry(key, "rpm", perMin100, 0, milli(100))
	b.refill(60_000)
	b.take(milli(100))
	assert.Equal(t, "0", e.rollback(b, 60_000).String())
	assert.Equal(t, "0/1", b.bal.String())
	// Half a minute after: half.
	b = newRefBucket(perMin100, 0)
	b.take(milli(100))
	e = newRefEntry(key, "rpm", perMin100, 0, milli(100))
	assert.Equal(t, "50000", e.rollback(b, 30_000).String())
	assert.Equal(t, "100000/1", b.bal.String(), "50 refilled and 50 given back")
}

func TestImplView(t *testing.T) {
	s := store.BucketState{LimitName: "rpm", TokensMilli: 1000, LastRefillMs: 0, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000}
	assert.Equal(t, "1416", implView(s, 250).String(), "whole millitokens only")
	assert.Equal(t, "100000", implView(s, 60_000).String())
	assert.Equal(t, "1000", implView(s, 0).String())
	s.TokensMilli = 200_000 // above a lowered capacity: cut at the next refill
	assert.Equal(t, "200000", implView(s, 0).String())
	assert.Equal(t, "100000", implView(s, 1).String())
}
