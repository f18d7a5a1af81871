package limiter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/faultproxy"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// TestTopUpServerErrorAfterApplyAppliedOnce: a top-up's transaction that
// DynamoDB applied but answered with a 500 is sent again by the SDK; the
// retry is answered from the transaction's idempotency token (or, were
// the token forgotten, refused by the record, which names the call), so
// TopUp reports it applied, the balance grows by the amount once and one
// audit event is recorded.
func TestTopUpServerErrorAfterApplyAppliedOnce(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl, p := proxiedLimiter(t, env, func(o *Options) { o.GroupCommit = false })
	lim := WithLimits(Prepaid("usd"))
	res, err := rl.TopUp(env.ctx, TopUpRequest{Entity: "e", Resource: "api", Limit: "usd", Amount: 100, ID: "pay-1"}, lim)
	require.NoError(t, err)
	require.Equal(t, TopUpResult{Applied: true}, res)

	p.Add(faultproxy.Rule{Op: "TransactWriteItems", Kind: faultproxy.Error500After, Times: 1})
	before := p.Count("TransactWriteItems")
	res, err = rl.TopUp(env.ctx, TopUpRequest{Entity: "e", Resource: "api", Limit: "usd", Amount: 250, ID: "pay-2"}, lim)
	require.NoError(t, err, "a top-up answered 500 after it applied")
	require.Equal(t, TopUpResult{Applied: true}, res)
	require.Equal(t, 1, p.Faults("TransactWriteItems"), "the fault hit no transaction: the test did not test")
	require.Equal(t, 2, p.Count("TransactWriteItems")-before, "the transaction answered 500, then its retry")
	require.Equal(t, int64(350_000), env.n(env.bucket("e", "api/usd.balance"), "b_usd_tk"))

	res, err = rl.TopUp(env.ctx, TopUpRequest{Entity: "e", Resource: "api", Limit: "usd", Amount: 250, ID: "pay-2"}, lim)
	require.NoError(t, err)
	require.Equal(t, TopUpResult{Applied: false}, res, "another call with the same id")
	require.Equal(t, int64(350_000), env.n(env.bucket("e", "api/usd.balance"), "b_usd_tk"))

	events, err := iterx.Collect(rl.Admin().AuditEvents(env.ctx, "e"))
	require.NoError(t, err)
	var ids []any
	for _, ev := range events {
		if ev.Action == store.AuditBalanceTopUp {
			ids = append(ids, ev.Details["topup_id"])
		}
	}
	require.ElementsMatch(t, []any{"pay-1", "pay-2"}, ids)
	require.NoError(t, rl.Close())
}

// TestPrepaidLimitValidateAndCodec: a prepaid limit validates without a
// refill and not with one, is stored as ra 0 and rp −4 and reads back
// equal; the bucket limit of its balance starts empty.
func TestPrepaidLimitValidateAndCodec(t *testing.T) {
	l := Prepaid("usd")
	require.NoError(t, l.Validate())
	bad := l
	bad.RefillAmount, bad.RefillPeriod = 1, store.CalendarBucketRefillPeriod
	require.ErrorIs(t, bad.Validate(), ErrValidation)
	bad = l.WithBurst(0)
	require.ErrorIs(t, bad.Validate(), ErrValidation)
	require.Equal(t, "{usd 1000000000000000 prepaid}", l.String())

	stored := configLimits(storeLimits([]Limit{l}))
	require.Equal(t, int64(0), stored[0].RefillAmount)
	require.Equal(t, int64(-4), stored[0].RefillPeriodSeconds)
	item := entityConfigItem("ns", "e", "api", storeLimits([]Limit{PerMinute("rpm", 10), l}))
	got, err := limitsFromItem(item)
	require.NoError(t, err)
	require.Equal(t, storeLimits([]Limit{PerMinute("rpm", 10), l}), got)

	s := bucketStateFromLimit("e", "api/usd.balance", store.Limit(l).PrepaidBucketLimit(), 1000)
	require.Equal(t, int64(0), s.TokensMilli)
	require.Equal(t, store.PrepaidBucketCapacity*1000, s.CapacityMilli, "the bucket caps no refund")
}
