package provisioner_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
)

// TestEntityWideResourceNames: "*" (limiter.AllResources) is a resource of
// an entity's limits and of resource defaults; "_default_" only of an
// entity's; a name the library refuses is refused.
func TestEntityWideResourceNames(t *testing.T) {
	for _, ok := range []string{"*", "_default_", "gpt-4o"} {
		assert.NoError(t, provisioner.ValidateEntityResource(ok), ok)
	}
	for _, ok := range []string{"*", "gpt-4o"} {
		assert.NoError(t, provisioner.ValidateDefaultsResource(ok), ok)
	}
	assert.Error(t, provisioner.ValidateDefaultsResource("_default_"))
	for _, bad := range []string{"**", "a#b", ""} {
		assert.Error(t, provisioner.ValidateEntityResource(bad), bad)
		assert.Error(t, provisioner.ValidateDefaultsResource(bad), bad)
	}
}

// TestEntityWideLimits needs the entity-wide resource of the library:
// Resources "*" under an entity stores its entity-wide limits, and at the
// top level every entity's entity-wide defaults; the Delete removes both.
func TestEntityWideLimits(t *testing.T) {
	ctx := testContext(t)
	client, table, admin := openAdmin(t, "tenant-a")
	rl := limiter.New(admin, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	h := &provisioner.Handler{Client: client}
	r := newResponses(t)

	usd := map[string]any{"Limits": map[string]any{"usd": map[string]any{"Capacity": "500000000", "Calendar": "month"}}}
	props := map[string]any{
		"TableName": table, "Namespace": "tenant-a",
		"Resources": map[string]any{"*": map[string]any{"Limits": map[string]any{"rpm": map[string]any{"Capacity": "5000"}}}},
		"Entities":  map[string]any{"acme": map[string]any{"Resources": map[string]any{"*": usd}}},
	}
	ev := event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = props
	resp := send(t, h, r, ev)
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: "acme", Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerCalendarMonth("usd", 500_000_000)}, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 5000)}, got)

	del := event(t, "delete", table, r.srv.URL)
	del.ResourceProperties = props
	del.PhysicalResourceID = resp.PhysicalResourceID
	resp = send(t, h, r, del)
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "acme", Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Empty(t, got)
}
