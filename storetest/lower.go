package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The LowerTokens scenario: an outside authority (an LLM provider's
// rate-limit headers, through llmhttp) lowers a bucket, with the writes
// every repository has: a bucket read, a write under the refill lock, an
// adjustment.

func init() {
	scenarios = append(scenarios, scenario{"LowerTokens", scLowerTokens})
}

func scLowerTokens(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	lims := limiter.WithLimits(cRPM, cTPM)
	lower := func(what string, c store.Consume) bool {
		ok, err := rl.LowerTokens(ctx, "k1", "gpt", c)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b.note("%s: lowered=%v %s", what, ok, b.bucket("k1", "gpt"))
		return ok
	}
	if lower("no bucket", store.Consume{"tpm": 10}) {
		t.Fatal("lowered a missing bucket")
	}
	lease, err := rl.Acquire(ctx, "k1", "gpt", store.Consume{"rpm": 1, "tpm": 100}, lims)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if err := lease.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(3 * time.Second) // refills 50 tpm, 0.5 rpm
	// Refilled to now (rpm 9 + 0.5, tpm 900 + 50), tpm lowered to 400.
	if !lower("to 400", store.Consume{"tpm": 400}) {
		t.Fatal("not lowered")
	}
	if got := b.bucket("k1", "gpt"); got != "rpm=9500/1000 tpm=400000/100000" {
		t.Fatalf("after lowering: %s", got)
	}
	if lower("never raised", store.Consume{"tpm": 600, "rpm": 100}) {
		t.Fatal("raised")
	}
	// A debt of 120 tokens: 7.2 s of refill before one token is there.
	if !lower("debt", store.Consume{"tpm": -120}) {
		t.Fatal("no debt")
	}
	if got := b.bucket("k1", "gpt"); got != "rpm=9500/1000 tpm=-120000/220000" {
		t.Fatalf("after the debt: %s", got)
	}
	_, err = rl.Acquire(ctx, "k1", "gpt", store.Consume{"rpm": 1, "tpm": 1}, lims)
	b.noteErr("in debt", err)
	var rle *limiter.RateLimitExceededError
	if !errors.As(err, &rle) || rle.RetryAfter < 7260*time.Millisecond || rle.RetryAfter > 7300*time.Millisecond {
		t.Fatalf("in debt: %v, want refused for 7.26 s (121 tokens at 1000 a minute)", err)
	}
}
