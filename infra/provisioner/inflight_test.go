package provisioner_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
)

// TestInFlightLimits: a declaration with InFlight stores a limit of calls
// in flight (never a rate of Capacity a minute, which is what the same
// Capacity alone declares), and a declaration that mixes InFlight with
// another kind's fields is refused with nothing stored.
func TestInFlightLimits(t *testing.T) {
	ctx := testContext(t)
	client, table, admin := openAdmin(t, "tenant-a")
	rl := limiter.New(admin, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	h := &provisioner.Handler{Client: client}
	r := newResponses(t)

	ev := event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = map[string]any{
		"TableName": table, "Namespace": "tenant-a",
		"Resources": map[string]any{"gpt-4o": map[string]any{"Limits": map[string]any{
			"rpm":   map[string]any{"Capacity": "600"},
			"calls": map[string]any{"Capacity": "32", "InFlight": true},
		}}},
		"Entities": map[string]any{"key-1": map[string]any{"Resources": map[string]any{
			"*": map[string]any{"Limits": map[string]any{"calls": map[string]any{"Capacity": 8, "InFlight": "true"}}},
		}}},
	}
	resp := send(t, h, r, ev)
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 600), limiter.InFlight("calls", 32)}, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.InFlight("calls", 8)}, got)

	for _, tc := range []struct {
		decl map[string]any
		want string
	}{
		{map[string]any{"Capacity": 5, "InFlight": true, "RefillPeriod": 60}, "Resources.embed.Limits.calls: a limit of calls in flight takes no RefillAmount, RefillPeriod, Calendar, Timezone or Prepaid"},
		{map[string]any{"Capacity": 5, "InFlight": true, "Calendar": "day"}, "Resources.embed.Limits.calls: a limit of calls in flight takes no"},
		{map[string]any{"Capacity": 5, "InFlight": true, "Prepaid": true}, "Resources.embed.Limits.calls: a limit of calls in flight takes no"},
		{map[string]any{"InFlight": true}, "Resources.embed.Limits.calls: Capacity must be a positive integer"},
		{map[string]any{"Capacity": 5, "InFlight": "maybe"}, `"maybe" is not a boolean`},
	} {
		ev := event(t, "create", table, r.srv.URL)
		ev.ResourceProperties = map[string]any{
			"TableName": table, "Namespace": "tenant-a",
			"Resources": map[string]any{"embed": map[string]any{"Limits": map[string]any{"calls": tc.decl}}},
		}
		resp := send(t, h, r, ev)
		require.Equal(t, cfn.StatusFailed, resp.Status, tc.want)
		require.Contains(t, resp.Reason, tc.want)
		got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: "embed"})
		require.NoError(t, err)
		require.Empty(t, got, tc.want)
	}
}
