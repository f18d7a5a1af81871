package limiter

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

func TestEntities(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx

	p, err := rl.Admin().CreateEntity(ctx, Entity{ID: "proj-1", Metadata: map[string]string{"tier": "gold"}})
	require.NoError(t, err)
	assert.Equal(t, "proj-1", p.Name, "created %+v", p)
	assert.WithinDuration(t, epoch.Truncate(1e9), p.CreatedAt, 0, "created %+v", p)
	_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "proj-1"})
	require.ErrorIs(t, err, ErrEntityExists, "duplicate")
	for _, id := range []string{"key-a", "key-b"} {
		_, err := rl.Admin().CreateEntity(ctx, Entity{ID: id, Name: "Key " + id, ParentID: "proj-1", Cascade: true})
		require.NoError(t, err)
	}
	got, err := rl.Admin().Entity(ctx, "key-a")
	require.NoError(t, err)
	want := Entity{ID: "key-a", Name: "Key key-a", ParentID: "proj-1", Cascade: true, Metadata: map[string]string{}, CreatedAt: epoch.Truncate(1e9)}
	if len(got.Metadata) == 0 {
		got.Metadata = map[string]string{} // no metadata: nil and empty are the same
	}
	assert.Equal(t, want, got, "GetEntity")
	gp, _ := rl.Admin().Entity(ctx, "proj-1")
	assert.Equal(t, "gold", gp.Metadata["tier"], "parent = %+v", gp)
	assert.Empty(t, gp.ParentID, "parent = %+v", gp)
	assert.False(t, gp.Cascade, "parent = %+v", gp)
	_, err = rl.Admin().Entity(ctx, "nobody")
	require.ErrorIs(t, err, ErrEntityNotFound, "missing")
	kids, err := iterx.Collect(rl.Admin().Children(ctx, "proj-1"))
	require.NoError(t, err, "Children")
	require.Len(t, kids, 2, "Children = %v", kids)

	for _, bad := range []Entity{{ID: ""}, {ID: "a#b"}, {ID: "ok", ParentID: "bad parent"}, {ID: "x\n"}} {
		_, err := rl.Admin().CreateEntity(ctx, bad)
		assert.ErrorIs(t, err, ErrInvalidIdentifier, "CreateEntity(%+v) = %v, want ErrInvalidIdentifier", bad, err)
	}

	// Delete removes META, configs and buckets of every resource.
	lim := WithLimits(PerMinute("rpm", 10))
	mustCommit(t, mustAcquire(t, rl, "key-a", "gpt-4", Consume{"rpm": 1}, lim))
	mustCommit(t, mustAcquire(t, rl, "key-a", "gpt-3", Consume{"rpm": 1}, lim))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "key-a", Resource: "gpt-4"}, []Limit{PerMinute("rpm", 5)}))
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "key-a"))
	for _, item := range []map[string]types.AttributeValue{
		env.bucket("key-a", "gpt-4"), env.bucket("key-a", "gpt-3"),
		env.item(pkEntity(env.repo.NamespaceID(), "key-a"), skMeta),
		env.item(pkEntity(env.repo.NamespaceID(), "key-a"), skConfig("gpt-4")),
	} {
		assert.Len(t, item, 0, "item left after DeleteEntity: %v", item)
	}
	res, _ := iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
	assert.Len(t, res, 0, "registry after delete = %v, want empty", res)
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "key-a"), "second delete")
}

func TestDeleteEntityManyItems(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	lim := WithLimits(PerMinute("rpm", 10))
	for i := range 30 {
		mustCommit(t, mustAcquire(t, rl, "big", fmt.Sprintf("res-%d", i), Consume{"rpm": 1}, lim))
	}
	env.rec.Reset()
	err := rl.Admin().DeleteEntity(env.ctx, "big")
	require.NoError(t, err)
	n := env.rec.Count("BatchWriteItem")
	assert.EqualValues(t, 2, n, "BatchWriteItem calls = %d, want 2 (25 + 5)", n)
	for _, c := range env.rec.Calls() {
		if c.Op == "BatchWriteItem" {
			assert.LessOrEqual(t, c.Items, 25, "items of one BatchWriteItem")
		}
	}
	item := env.bucket("big", "res-29")
	require.Len(t, item, 0, "bucket left")
}

func TestStoredLimitsResolution(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx

	_, _, err := rl.Admin().ResolveLimits(ctx, "e", "gpt")
	require.NoError(t, err)
	_, err = rl.Acquire(ctx, "e", "gpt", Consume{"rpm": 1})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve, "no config")
	require.Equal(t, "limits", ve.Field, "no config: %v", err)
	wantMsg := `limiter: invalid limits: no limits configured for entity "e" and resource "gpt": store them for the ` +
		`entity (on the resource or on _default_), the resource or the system, or pass WithLimits`
	assert.EqualError(t, err, wantMsg)

	steps := []struct {
		name   string
		do     func() error
		want   int64
		source ConfigSource
	}{
		{"system", func() error {
			return rl.Admin().SetSystemDefaults(ctx, []Limit{PerMinute("rpm", 1)}, OnUnavailableAllow)
		}, 1, SourceSystem},
		{"resource", func() error { return rl.Admin().SetLimits(ctx, Scope{Resource: "gpt"}, []Limit{PerMinute("rpm", 2)}) }, 2, SourceResource},
		{"entity default", func() error {
			return rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: DefaultResource}, []Limit{PerMinute("rpm", 3)})
		}, 3, SourceEntityDefault},
		{"entity", func() error {
			return rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "gpt"}, []Limit{PerMinute("rpm", 4)})
		}, 4, SourceEntity},
		{"entity deleted", func() error { return rl.Admin().DeleteLimits(ctx, Scope{Entity: "e", Resource: "gpt"}) }, 3, SourceEntityDefault},
		{"entity default deleted", func() error { return rl.Admin().DeleteLimits(ctx, Scope{Entity: "e", Resource: DefaultResource}) }, 2, SourceResource},
		{"resource deleted", func() error { return rl.Admin().DeleteLimits(ctx, Scope{Resource: "gpt"}) }, 1, SourceSystem},
	}
	for _, s := range steps {
		require.NoError(t, s.do(), s.name)
		// Every config write evicts its cache slot: visible at once (the
		// original kept serving the cached limits for up to its TTL, 60 s).
		limits, source, err := rl.Admin().ResolveLimits(ctx, "e", "gpt")
		assert.NoError(t, err, "after %s", s.name)
		if assert.Len(t, limits, 1, "after %s: %v", s.name, limits) {
			assert.Equal(t, s.want, limits[0].Capacity, "after %s: capacity", s.name)
		}
		assert.Equal(t, s.source, source, "after %s: source", s.name)
	}
	limits, ou, err := rl.Admin().SystemDefaults(ctx)
	assert.NoError(t, err, "GetSystemDefaults")
	assert.Equal(t, OnUnavailableAllow, ou, "GetSystemDefaults")
	assert.Len(t, limits, 1, "GetSystemDefaults = %v", limits)
	got := rl.configs.resolveOnUnavailable(ctx)
	assert.EqualValues(t, OnUnavailableAllow, got, "resolveOnUnavailable = %q", got)
	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{}))
	limits, _, _ = rl.Admin().ResolveLimits(ctx, "e", "gpt")
	assert.Nil(t, limits, "after deleting everything: %v", limits)
}

func TestStoredLimitsRegistriesAndListing(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	for _, r := range []string{"gpt-4", "claude", "openai/o1"} {
		err := rl.Admin().SetLimits(ctx, Scope{Resource: r}, []Limit{PerMinute("rpm", 10)})
		require.NoError(t, err)
	}
	got, _ := iterx.Collect(rl.Admin().ResourcesWithDefaults(ctx))
	assert.Equal(t, []string{"claude", "gpt-4", "openai/o1"}, got, "ListResourcesWithDefaults")
	rl.Admin().DeleteLimits(ctx, Scope{Resource: "claude"})
	got, _ = iterx.Collect(rl.Admin().ResourcesWithDefaults(ctx))
	assert.Equal(t, []string{"gpt-4", "openai/o1"}, got, "after delete")
	defaults, _ := rl.Admin().Limits(ctx, Scope{Resource: "gpt-4"})
	assert.Equal(t, []Limit{PerMinute("rpm", 10)}, defaults, "GetResourceDefaults")

	for i := range 5 {
		err := rl.Admin().SetLimits(ctx, Scope{Entity: fmt.Sprintf("ent-%d", i), Resource: "gpt-4"}, []Limit{PerMinute("tpm", 100)})
		require.NoError(t, err)
	}
	rl.Admin().SetLimits(ctx, Scope{Entity: "ent-0", Resource: "gpt-4"}, []Limit{PerMinute("tpm", 200)}) // replace: counted once
	rl.Admin().SetLimits(ctx, Scope{Entity: "ent-0", Resource: DefaultResource}, []Limit{PerMinute("tpm", 200)})
	got, _ = iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
	assert.Equal(t, []string{DefaultResource, "gpt-4"}, got, "ListResourcesWithEntityConfigs")
	var ids []string
	cursor := ""
	pages := 0
	for {
		page, next, err := rl.listEntitiesWithCustomLimits(ctx, "gpt-4", 2, cursor)
		require.NoError(t, err)
		ids = append(ids, page...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	sort.Strings(ids)
	assert.Equal(t, []string{"ent-0", "ent-1", "ent-2", "ent-3", "ent-4"}, ids, "ListEntitiesWithCustomLimits")
	assert.GreaterOrEqual(t, pages, 3, "ListEntitiesWithCustomLimits pages")
	_, _, err := rl.listEntitiesWithCustomLimits(ctx, "gpt-4", 2, "!!not-a-cursor")
	assert.ErrorIs(t, err, ErrValidation, "bad cursor = %v", err)
	for i := range 5 {
		rl.Admin().DeleteLimits(ctx, Scope{Entity: fmt.Sprintf("ent-%d", i), Resource: "gpt-4"})
	}
	rl.Admin().DeleteLimits(ctx, Scope{Entity: "ent-0", Resource: "gpt-4"}) // missing: silent
	got, _ = iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
	assert.Equal(t, []string{DefaultResource}, got, "after deletes")

	// Validation happens before any write.
	env.rec.Reset()
	for name, err := range map[string]error{
		"bad resource":  rl.Admin().SetLimits(ctx, Scope{Resource: "_x"}, []Limit{PerMinute("rpm", 1)}),
		"bad limit":     rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "gpt"}, []Limit{PerMinute("wcu", 1)}),
		"bad entity":    rl.Admin().SetLimits(ctx, Scope{Entity: "e#1", Resource: "gpt"}, []Limit{PerMinute("rpm", 1)}),
		"bad system":    rl.Admin().SetLimits(ctx, Scope{}, []Limit{{Name: "rpm"}}),
		"bad mode":      rl.Admin().SetSystemDefaults(ctx, nil, "sometimes"),
		"bad principal": rl.Admin().SetLimits(ContextWithPrincipal(ctx, "not valid!"), Scope{Entity: "e", Resource: "gpt"}, []Limit{PerMinute("rpm", 1)}),
	} {
		assert.ErrorIs(t, err, ErrValidation, "%s: err = %v, want ErrValidation", name, err)
	}
	assert.Zero(t, env.rec.Count(""), "DynamoDB calls caused by invalid input: %s", env.calls())
}

// TestBucketSyncAndReconcile checks that SetLimits rewrites the bucket's
// parameters and removes its TTL, and DeleteLimits reconciles it with the
// defaults (TTL back, stale limits removed).
func TestBucketSyncAndReconcile(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	err := rl.Admin().SetLimits(ctx, Scope{}, []Limit{PerMinute("rpm", 10)})
	require.NoError(t, err)
	mustCommit(t, mustAcquire(t, rl, "e", "gpt", Consume{"rpm": 1}))
	b := env.bucket("e", "gpt")
	got := env.n(b, "ttl")
	assert.Equal(t, epoch.Unix()+420, got, "system-config bucket ttl = %d, want now+420", got)
	err = rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "gpt"}, []Limit{PerMinute("rpm", 20), PerMinute("tpm", 500)})
	require.NoError(t, err)
	b = env.bucket("e", "gpt")
	assert.NotContains(t, b, "ttl", "entity config: ttl not removed")
	assert.EqualValues(t, 20_000, env.n(b, "b_rpm_cp"), "synced params: %v", b)
	assert.EqualValues(t, 500_000, env.n(b, "b_tpm_cp"), "synced params: %v", b)
	assert.EqualValues(t, 500_000, env.n(b, "b_tpm_tk"), "synced params: %v", b)
	mustCommit(t, mustAcquire(t, rl, "e", "gpt", Consume{"tpm": 100}))
	got = env.tokens("e", "gpt", "tpm")
	assert.EqualValues(t, 400_000, got, "tpm after acquire = %d", got)
	err = rl.Admin().DeleteLimits(ctx, Scope{Entity: "e", Resource: "gpt"})
	require.NoError(t, err)
	b = env.bucket("e", "gpt")
	assert.EqualValues(t, 10_000, env.n(b, "b_rpm_cp"), "reconciled: %v", b)
	assert.Equal(t, epoch.Unix()+420, env.n(b, "ttl"), "reconciled: %v", b)
	assert.NotContains(t, b, "b_tpm_tk", "stale tpm attributes kept")
}

func TestAuditEvents(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter(func(o *Options) { o.Principal = "arn:aws:iam::123456789012:role/app" })
	ctx := env.ctx
	rl.Admin().CreateEntity(ctx, Entity{ID: "e"})
	rl.Admin().SetLimits(ContextWithPrincipal(ctx, "admin@example.com"), Scope{Entity: "e", Resource: "gpt"}, []Limit{PerMinute("rpm", 5)})
	rl.Admin().SetSystemDefaults(ctx, []Limit{PerMinute("rpm", 1)}, OnUnavailableBlock)

	ns := env.repo.NamespaceID()
	out, err := env.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(env.repo.Table()),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pkAudit(ns, "e"))},
	})
	require.NoError(t, err, "audit items of e")
	require.Len(t, out.Items, 2, "audit items of e")
	var evs []AuditEvent
	for _, item := range out.Items {
		ev, ok, err := auditEventFromItem(item)
		require.NoError(t, err)
		require.True(t, ok, "auditEventFromItem skipped %v", item)
		assert.Len(t, ev.EventID, 26, "event id %q", ev.EventID)
		got := env.n(item, "ttl")
		assert.Equal(t, epoch.Unix()+90*86400, got, "audit ttl = %d", got)
		evs = append(evs, ev)
	}
	assert.Equal(t, store.AuditEntityCreated, evs[0].Action, "first event %+v", evs[0])
	assert.Equal(t, "arn:aws:iam::123456789012:role/app", evs[0].Principal, "first event %+v", evs[0])
	assert.Equal(t, store.AuditLimitsSet, evs[1].Action, "second event %+v", evs[1])
	assert.Equal(t, "admin@example.com", evs[1].Principal, "second event %+v", evs[1])
	assert.Equal(t, "gpt", evs[1].Resource, "second event %+v", evs[1])
	out, _ = env.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(env.repo.Table()),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pkAudit(ns, "$SYSTEM"))},
	})
	assert.Len(t, out.Items, 1, "system audit events")
}

func TestNamespacesIsolateData(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	other, err := openDynamo(ctx, env.client, func(o *DynamoDBOptions) {
		o.Table = env.repo.Table()
		o.Namespace = "tenant-b"
		o.Now = env.clock.now
	})
	require.NoError(t, err)
	require.NotEqual(t, env.repo.NamespaceID(), other.NamespaceID(), "namespace ids")
	require.Len(t, other.NamespaceID(), 11, "namespace id")
	lim := WithLimits(PerMinute("rpm", 2))
	a, b := env.limiter(), New(other, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	mustCommit(t, mustAcquire(t, a, "e", "api", Consume{"rpm": 2}, lim))
	mustCommit(t, mustAcquire(t, b, "e", "api", Consume{"rpm": 2}, lim)) // separate bucket
	_, err = a.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrRateLimited, "namespace a")
	scoped, err := env.repo.namespace(ctx, "tenant-b")
	require.NoError(t, err, "Namespace(tenant-b)")
	require.Equal(t, other.NamespaceID(), scoped.NamespaceID(), "Namespace(tenant-b)")
	_, err = env.repo.namespace(ctx, "nope")
	require.ErrorIs(t, err, ErrNamespaceNotFound, "Namespace(nope)")
	// Re-opening finds the registered namespace instead of registering it again.
	again, err := openDynamo(ctx, env.client, func(o *DynamoDBOptions) { o.Table = env.repo.Table(); o.Namespace = "tenant-b" })
	require.NoError(t, err, "reopen")
	require.Equal(t, other.NamespaceID(), again.NamespaceID(), "reopen")
	_, err = openDynamo(ctx, env.client, func(o *DynamoDBOptions) { o.Table = "bad_name" })
	require.ErrorIs(t, err, ErrValidation, "bad table name")
}

func TestOpenWritesVersionRecord(t *testing.T) {
	env := newTestEnv(t)
	item := env.item("_/SYSTEM#", "#VERSION")
	s, _ := schemaGetS(item, "schema_version")
	assert.EqualValues(t, "0.10.0", s, "schema_version = %q", s)
	assert.IsType(t, &types.AttributeValueMemberNULL{}, item["lambda_version"], "lambda_version, want NULL")
	// A table of another major schema is refused.
	_, err := env.client.PutItem(env.ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()),
		Item: versionItem(versionRecord{SchemaVersion: "1.0.0", ClientMinVersion: "0.0.0"})})
	require.NoError(t, err)
	_, err = openDynamo(context.Background(), env.client, func(o *DynamoDBOptions) { o.Table = env.repo.Table() })
	require.ErrorIs(t, err, ErrIncompatibleSchema, "open on schema 1.0.0 = %v, want ErrIncompatibleSchema", err)
}

// TestCorruptStoredConfigIsUnavailable: a stored config the library cannot
// read is an infrastructure error (on_unavailable applies), not bad input.
func TestCorruptStoredConfigIsUnavailable(t *testing.T) {
	env := newTestEnv(t)
	item := resourceConfigItem(env.repo.NamespaceID(), "gpt", nil)
	item["l_rpm_cp"] = schemaN(10) // no ra/rp
	_, err := env.client.PutItem(env.ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item})
	require.NoError(t, err)
	rl := env.limiter()
	_, err = rl.Acquire(env.ctx, "e", "gpt", Consume{"rpm": 1})
	require.ErrorIs(t, err, ErrUnavailable)
	require.NotErrorIs(t, err, ErrValidation)
	l, err := rl.Acquire(env.ctx, "e", "gpt", Consume{"rpm": 1}, WithOnUnavailable(OnUnavailableAllow))
	require.NoError(t, err, "allow")
	require.True(t, l.FailedOpen(), "allow: %v, want a no-op lease", l)
}

// TestDeleteProvisionerConfigKeepsRegistryCount: the Python library's
// provisioner writes entity configs without registry keys and without
// counting them; deleting one must not count down the configs the library
// wrote for the same resource, which would drop the resource from
// ListResourcesWithEntityConfigs while it still has some.
func TestDeleteProvisionerConfigKeepsRegistryCount(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "lib-key", Resource: "gpt-4"}, []Limit{PerMinute("rpm", 10)}))
	// The provisioner's shape: the config item alone, no GSI3 keys, no
	// registry count.
	item := entityConfigItem(env.repo.NamespaceID(), "prov-key", "gpt-4", storeLimits([]Limit{PerMinute("rpm", 5)}))
	for _, attr := range []string{"GSI3PK", "GSI3SK", "GSI4PK", "GSI4SK"} {
		delete(item, attr)
	}
	_, err := env.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{Entity: "prov-key", Resource: "gpt-4"}))
	got, _ := rl.Admin().Limits(ctx, Scope{Entity: "prov-key", Resource: "gpt-4"})
	assert.Nil(t, got, "provisioner config still stored: %v", got)
	res, err := iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
	assert.NoError(t, err, "ListResourcesWithEntityConfigs")
	assert.Equal(t, []string{"gpt-4"}, res, "ListResourcesWithEntityConfigs, want lib-key's config still there")
	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{Entity: "lib-key", Resource: "gpt-4"}))
	res, _ = iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
	assert.Empty(t, res, "ListResourcesWithEntityConfigs after deleting the last config")
}
