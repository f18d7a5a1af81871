package limiter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

func TestEntities(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx

	p, err := rl.CreateEntity(ctx, Entity{ID: "proj-1", Metadata: map[string]string{"tier": "gold"}})
	require.NoError(t, err)
	assert.False(t, p.Name != "proj-1" || !p.CreatedAt.Equal(epoch.Truncate(1e9)), "created %+v", p)
	if _, err := rl.CreateEntity(ctx, Entity{ID: "proj-1"}); !errors.Is(err, ErrEntityExists) {
		t.Fatalf("duplicate = %v, want ErrEntityExists", err)
	}
	for _, id := range []string{"key-a", "key-b"} {
		_, err := rl.CreateEntity(ctx, Entity{ID: id, Name: "Key " + id, ParentID: "proj-1", Cascade: true})
		require.NoError(t, err)
	}
	got, err := rl.GetEntity(ctx, "key-a")
	require.NoError(t, err)
	want := Entity{ID: "key-a", Name: "Key key-a", ParentID: "proj-1", Cascade: true, Metadata: map[string]string{}, CreatedAt: epoch.Truncate(1e9)}
	diff := cmp.Diff(want, got, cmpopts.EquateEmpty())
	assert.EqualValues(t, "", diff, "GetEntity (-want +got):\n%s", diff)
	gp, _ := rl.GetEntity(ctx, "proj-1")
	assert.False(t, gp.Metadata["tier"] != "gold" || gp.ParentID != "" || gp.Cascade, "parent = %+v", gp)
	if _, err := rl.GetEntity(ctx, "nobody"); !errors.Is(err, ErrEntityNotFound) {
		t.Fatalf("missing = %v, want ErrEntityNotFound", err)
	}
	kids, err := rl.Children(ctx, "proj-1")
	require.False(t, err != nil || len(kids) != 2, "Children = %v, %v", kids, err)

	for _, bad := range []Entity{{ID: ""}, {ID: "a#b"}, {ID: "ok", ParentID: "bad parent"}, {ID: "x\n"}} {
		_, err := rl.CreateEntity(ctx, bad)
		assert.ErrorIs(t, err, ErrInvalidIdentifier, "CreateEntity(%+v) = %v, want ErrInvalidIdentifier", bad, err)
	}

	// Delete removes META, configs and buckets of every resource.
	lim := WithLimits(PerMinute("rpm", 10))
	mustCommit(t, mustAcquire(t, rl, "key-a", "gpt-4", Consume{"rpm": 1}, lim))
	mustCommit(t, mustAcquire(t, rl, "key-a", "gpt-3", Consume{"rpm": 1}, lim))
	if err := rl.SetLimits(ctx, "key-a", "gpt-4", []Limit{PerMinute("rpm", 5)}); err != nil {
		t.Fatal(err)
	}
	if err := rl.DeleteEntity(ctx, "key-a"); err != nil {
		t.Fatal(err)
	}
	for _, item := range []map[string]types.AttributeValue{
		env.bucket("key-a", "gpt-4"), env.bucket("key-a", "gpt-3"),
		env.item(pkEntity(env.repo.NamespaceID(), "key-a"), skMeta),
		env.item(pkEntity(env.repo.NamespaceID(), "key-a"), skConfig("gpt-4")),
	} {
		assert.Len(t, item, 0, "item left after DeleteEntity: %v", item)
	}
	res, _ := rl.ListResourcesWithEntityConfigs(ctx)
	assert.Len(t, res, 0, "registry after delete = %v, want empty", res)
	if err := rl.DeleteEntity(ctx, "key-a"); err != nil {
		t.Fatalf("second delete = %v", err)
	}
}

func TestDeleteEntityManyItems(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	lim := WithLimits(PerMinute("rpm", 10))
	for i := range 30 {
		mustCommit(t, mustAcquire(t, rl, "big", fmt.Sprintf("res-%d", i), Consume{"rpm": 1}, lim))
	}
	env.rec.Reset()
	err := rl.DeleteEntity(env.ctx, "big")
	require.NoError(t, err)
	n := env.rec.Count("BatchWriteItem")
	assert.EqualValues(t, 2, n, "BatchWriteItem calls = %d, want 2 (25 + 5)", n)
	for _, c := range env.rec.Calls() {
		assert.False(t, c.Op == "BatchWriteItem" && c.Items > 25, "BatchWriteItem with %d items", c.Items)
	}
	item := env.bucket("big", "res-29")
	require.Len(t, item, 0, "bucket left")
}

func TestStoredLimitsResolution(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx

	if _, _, err := rl.ResolveLimits(ctx, "e", "gpt"); err != nil {
		t.Fatal(err)
	}
	_, err := rl.Acquire(ctx, "e", "gpt", Consume{"rpm": 1})
	var ve *ValidationError
	require.False(t, !errors.As(err, &ve) || ve.Field != "limits", "no config: err = %v, want ValidationError on limits", err)
	wantMsg := `limiter: invalid limits: no limits configured for entity "e" and resource "gpt": store them for the ` +
		`entity (on the resource or on _default_), the resource or the system, or pass WithLimits`
	if err.Error() != wantMsg {
		t.Errorf("message %q", err.Error())
	}

	steps := []struct {
		name   string
		do     func() error
		want   int64
		source ConfigSource
	}{
		{"system", func() error { return rl.SetSystemDefaults(ctx, []Limit{PerMinute("rpm", 1)}, OnUnavailableAllow) }, 1, SourceSystem},
		{"resource", func() error { return rl.SetResourceDefaults(ctx, "gpt", []Limit{PerMinute("rpm", 2)}) }, 2, SourceResource},
		{"entity default", func() error { return rl.SetLimits(ctx, "e", DefaultResource, []Limit{PerMinute("rpm", 3)}) }, 3, SourceEntityDefault},
		{"entity", func() error { return rl.SetLimits(ctx, "e", "gpt", []Limit{PerMinute("rpm", 4)}) }, 4, SourceEntity},
		{"entity deleted", func() error { return rl.DeleteLimits(ctx, "e", "gpt") }, 3, SourceEntityDefault},
		{"entity default deleted", func() error { return rl.DeleteLimits(ctx, "e", DefaultResource) }, 2, SourceResource},
		{"resource deleted", func() error { return rl.DeleteResourceDefaults(ctx, "gpt") }, 1, SourceSystem},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		// Every config write evicts its cache slot: visible at once (the
		// original kept serving the cached limits for up to its TTL, 60 s).
		limits, source, err := rl.ResolveLimits(ctx, "e", "gpt")
		assert.False(t, err != nil || len(limits) != 1 || limits[0].Capacity != s.want || source != s.source, "after %s: %v %q %v, want capacity %d from %q", s.name, limits, source, err, s.want, s.source)
	}
	if limits, ou, err := rl.GetSystemDefaults(ctx); err != nil || ou != OnUnavailableAllow || len(limits) != 1 {
		t.Errorf("GetSystemDefaults = %v %q %v", limits, ou, err)
	}
	got := rl.configs.resolveOnUnavailable(ctx)
	assert.EqualValues(t, OnUnavailableAllow, got, "resolveOnUnavailable = %q", got)
	if err := rl.DeleteSystemDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	limits, _, _ := rl.ResolveLimits(ctx, "e", "gpt")
	assert.Nil(t, limits, "after deleting everything: %v", limits)
}

func TestStoredLimitsRegistriesAndListing(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	for _, r := range []string{"gpt-4", "claude", "openai/o1"} {
		err := rl.SetResourceDefaults(ctx, r, []Limit{PerMinute("rpm", 10)})
		require.NoError(t, err)
	}
	got, _ := rl.ListResourcesWithDefaults(ctx)
	assert.True(t, cmp.Equal(got, []string{"claude", "gpt-4", "openai/o1"}), "ListResourcesWithDefaults = %v", got)
	rl.DeleteResourceDefaults(ctx, "claude")
	got, _ = rl.ListResourcesWithDefaults(ctx)
	assert.True(t, cmp.Equal(got, []string{"gpt-4", "openai/o1"}), "after delete = %v", got)
	if got, _ := rl.GetResourceDefaults(ctx, "gpt-4"); len(got) != 1 || got[0] != PerMinute("rpm", 10) {
		t.Errorf("GetResourceDefaults = %v", got)
	}

	for i := range 5 {
		err := rl.SetLimits(ctx, fmt.Sprintf("ent-%d", i), "gpt-4", []Limit{PerMinute("tpm", 100)})
		require.NoError(t, err)
	}
	rl.SetLimits(ctx, "ent-0", "gpt-4", []Limit{PerMinute("tpm", 200)}) // replace: counted once
	rl.SetLimits(ctx, "ent-0", DefaultResource, []Limit{PerMinute("tpm", 200)})
	got, _ = rl.ListResourcesWithEntityConfigs(ctx)
	assert.True(t, cmp.Equal(got, []string{DefaultResource, "gpt-4"}), "ListResourcesWithEntityConfigs = %v", got)
	var ids []string
	cursor := ""
	pages := 0
	for {
		page, next, err := rl.ListEntitiesWithCustomLimits(ctx, "gpt-4", 2, cursor)
		require.NoError(t, err)
		ids = append(ids, page...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	sort.Strings(ids)
	assert.False(t, !cmp.Equal(ids, []string{"ent-0", "ent-1", "ent-2", "ent-3", "ent-4"}) || pages < 3, "ListEntitiesWithCustomLimits = %v in %d pages", ids, pages)
	_, _, err := rl.ListEntitiesWithCustomLimits(ctx, "gpt-4", 2, "!!not-a-cursor")
	assert.ErrorIs(t, err, ErrValidation, "bad cursor = %v", err)
	for i := range 5 {
		rl.DeleteLimits(ctx, fmt.Sprintf("ent-%d", i), "gpt-4")
	}
	rl.DeleteLimits(ctx, "ent-0", "gpt-4") // missing: silent
	got, _ = rl.ListResourcesWithEntityConfigs(ctx)
	assert.True(t, cmp.Equal(got, []string{DefaultResource}), "after deletes = %v", got)

	// Validation happens before any write.
	env.rec.Reset()
	for name, err := range map[string]error{
		"bad resource":  rl.SetResourceDefaults(ctx, "_x", []Limit{PerMinute("rpm", 1)}),
		"bad limit":     rl.SetLimits(ctx, "e", "gpt", []Limit{PerMinute("wcu", 1)}),
		"bad entity":    rl.SetLimits(ctx, "e#1", "gpt", []Limit{PerMinute("rpm", 1)}),
		"bad system":    rl.SetSystemDefaults(ctx, []Limit{{Name: "rpm"}}, ""),
		"bad mode":      rl.SetSystemDefaults(ctx, nil, "sometimes"),
		"bad principal": rl.SetLimits(ContextWithPrincipal(ctx, "not valid!"), "e", "gpt", []Limit{PerMinute("rpm", 1)}),
	} {
		assert.ErrorIs(t, err, ErrValidation, "%s: err = %v, want ErrValidation", name, err)
	}
	if n := env.rec.Count(""); n != 0 {
		t.Errorf("invalid input caused %d DynamoDB calls: %s", n, env.calls())
	}
}

// TestBucketSyncAndReconcile checks that SetLimits rewrites the bucket's
// parameters and removes its TTL, and DeleteLimits reconciles it with the
// defaults (TTL back, stale limits removed).
func TestBucketSyncAndReconcile(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	err := rl.SetSystemDefaults(ctx, []Limit{PerMinute("rpm", 10)}, "")
	require.NoError(t, err)
	mustCommit(t, mustAcquire(t, rl, "e", "gpt", Consume{"rpm": 1}))
	b := env.bucket("e", "gpt")
	got := env.n(b, "ttl")
	assert.Equal(t, epoch.Unix()+420, got, "system-config bucket ttl = %d, want now+420", got)
	err = rl.SetLimits(ctx, "e", "gpt", []Limit{PerMinute("rpm", 20), PerMinute("tpm", 500)})
	require.NoError(t, err)
	b = env.bucket("e", "gpt")
	_, ok := b["ttl"]
	assert.False(t, ok, "entity config: ttl not removed")
	assert.False(t, env.n(b, "b_rpm_cp") != 20_000 || env.n(b, "b_tpm_cp") != 500_000 || env.n(b, "b_tpm_tk") != 500_000, "synced params: %v", b)
	mustCommit(t, mustAcquire(t, rl, "e", "gpt", Consume{"tpm": 100}))
	got = env.tokens("e", "gpt", "tpm")
	assert.EqualValues(t, 400_000, got, "tpm after acquire = %d", got)
	err = rl.DeleteLimits(ctx, "e", "gpt")
	require.NoError(t, err)
	b = env.bucket("e", "gpt")
	assert.False(t, env.n(b, "b_rpm_cp") != 10_000 || env.n(b, "ttl") != epoch.Unix()+420, "reconciled: %v", b)
	_, ok = b["b_tpm_tk"]
	assert.False(t, ok, "stale tpm attributes kept")
}

func TestAuditEvents(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter(WithPrincipal("arn:aws:iam::123456789012:role/app"))
	ctx := env.ctx
	rl.CreateEntity(ctx, Entity{ID: "e"})
	rl.SetLimits(ContextWithPrincipal(ctx, "admin@example.com"), "e", "gpt", []Limit{PerMinute("rpm", 5)})
	rl.SetSystemDefaults(ctx, []Limit{PerMinute("rpm", 1)}, OnUnavailableBlock)

	ns := env.repo.NamespaceID()
	out, err := env.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(env.repo.Table()),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pkAudit(ns, "e"))},
	})
	if err != nil || len(out.Items) != 2 {
		t.Fatalf("audit items of e: %d, %v", len(out.Items), err)
	}
	var evs []AuditEvent
	for _, item := range out.Items {
		ev, ok, err := auditEventFromItem(item)
		require.False(t, err != nil || !ok, err)
		assert.Len(t, ev.EventID, 26, "event id %q", ev.EventID)
		got := env.n(item, "ttl")
		assert.Equal(t, epoch.Unix()+90*86400, got, "audit ttl = %d", got)
		evs = append(evs, ev)
	}
	if evs[0].Action != store.AuditEntityCreated || evs[0].Principal != "arn:aws:iam::123456789012:role/app" {
		t.Errorf("first event %+v", evs[0])
	}
	if evs[1].Action != store.AuditLimitsSet || evs[1].Principal != "admin@example.com" || evs[1].Resource != "gpt" {
		t.Errorf("second event %+v", evs[1])
	}
	out, _ = env.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(env.repo.Table()),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pkAudit(ns, "$SYSTEM"))},
	})
	if len(out.Items) != 1 {
		t.Errorf("system audit events = %d, want 1", len(out.Items))
	}
}

func TestNamespacesIsolateData(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	other, err := OpenDynamoDB(ctx, env.client, func(o *DynamoDBOptions) {
		o.Table = env.repo.Table()
		o.Namespace = "tenant-b"
		o.Now = env.clock.now
	})
	require.NoError(t, err)
	if other.NamespaceID() == env.repo.NamespaceID() || len(other.NamespaceID()) != 11 {
		t.Fatalf("namespace ids %q %q", other.NamespaceID(), env.repo.NamespaceID())
	}
	lim := WithLimits(PerMinute("rpm", 2))
	a, b := env.limiter(), New(other, WithClock(env.clock.now), WithSpeculativeWrites(false))
	mustCommit(t, mustAcquire(t, a, "e", "api", Consume{"rpm": 2}, lim))
	mustCommit(t, mustAcquire(t, b, "e", "api", Consume{"rpm": 2}, lim)) // separate bucket
	if _, err := a.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("namespace a = %v, want rate limited", err)
	}
	scoped, err := env.repo.Namespace(ctx, "tenant-b")
	require.False(t, err != nil || scoped.NamespaceID() != other.NamespaceID(), "Namespace(tenant-b) = %v, %v", scoped, err)
	if _, err := env.repo.Namespace(ctx, "nope"); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("Namespace(nope) = %v", err)
	}
	// Re-opening finds the registered namespace instead of registering it again.
	again, err := OpenDynamoDB(ctx, env.client, func(o *DynamoDBOptions) { o.Table = env.repo.Table(); o.Namespace = "tenant-b" })
	require.False(t, err != nil || again.NamespaceID() != other.NamespaceID(), "reopen: %v %v", again, err)
	if _, err := OpenDynamoDB(ctx, env.client, func(o *DynamoDBOptions) { o.Table = "bad_name" }); !errors.Is(err, ErrValidation) {
		t.Fatalf("bad table name = %v", err)
	}
}

func TestOpenWritesVersionRecord(t *testing.T) {
	env := newTestEnv(t)
	item := env.item("_/SYSTEM#", "#VERSION")
	s, _ := schemaGetS(item, "schema_version")
	assert.EqualValues(t, "0.10.0", s, "schema_version = %q", s)
	_, isNull := item["lambda_version"].(*types.AttributeValueMemberNULL)
	assert.True(t, isNull, "lambda_version = %v, want NULL", item["lambda_version"])
	// A table of another major schema is refused.
	_, err := env.client.PutItem(env.ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()),
		Item: versionItem(versionRecord{SchemaVersion: "1.0.0", ClientMinVersion: "0.0.0"})})
	require.NoError(t, err)
	_, err = OpenDynamoDB(context.Background(), env.client, func(o *DynamoDBOptions) { o.Table = env.repo.Table() })
	require.ErrorIs(t, err, ErrIncompatibleSchema, "open on schema 1.0.0 = %v, want ErrIncompatibleSchema", err)
}

// TestCorruptStoredConfigIsUnavailable: a stored config the library cannot
// read is an infrastructure error (on_unavailable applies), not bad input.
func TestCorruptStoredConfigIsUnavailable(t *testing.T) {
	env := newTestEnv(t)
	item := resourceConfigItem(env.repo.NamespaceID(), "gpt", nil)
	item["l_rpm_cp"] = schemaN(10) // no ra/rp
	if _, err := env.client.PutItem(env.ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	rl := env.limiter()
	_, err := rl.Acquire(env.ctx, "e", "gpt", Consume{"rpm": 1})
	require.False(t, !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrValidation), "err = %v, want ErrUnavailable", err)
	if l, err := rl.Acquire(env.ctx, "e", "gpt", Consume{"rpm": 1}, WithOnUnavailable(OnUnavailableAllow)); err != nil || !l.Noop() {
		t.Fatalf("allow: %v %v", l, err)
	}
}

// TestDeleteProvisionerConfigKeepsRegistryCount: the Python library's
// provisioner writes entity configs without registry keys and without
// counting them; deleting one must not count down the configs the library
// wrote for the same resource, which would drop the resource from
// ListResourcesWithEntityConfigs while it still has some.
func TestDeleteProvisionerConfigKeepsRegistryCount(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	if err := rl.SetLimits(ctx, "lib-key", "gpt-4", []Limit{PerMinute("rpm", 10)}); err != nil {
		t.Fatal(err)
	}
	// The provisioner's shape: the config item alone, no GSI3 keys, no
	// registry count.
	item := entityConfigItem(env.repo.NamespaceID(), "prov-key", "gpt-4", []Limit{PerMinute("rpm", 5)})
	for _, attr := range []string{"GSI3PK", "GSI3SK", "GSI4PK", "GSI4SK"} {
		delete(item, attr)
	}
	if _, err := env.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	if err := rl.DeleteLimits(ctx, "prov-key", "gpt-4"); err != nil {
		t.Fatal(err)
	}
	got, _ := rl.GetLimits(ctx, "prov-key", "gpt-4")
	assert.Nil(t, got, "provisioner config still stored: %v", got)
	res, err := rl.ListResourcesWithEntityConfigs(ctx)
	assert.False(t, err != nil || len(res) != 1 || res[0] != "gpt-4", "ListResourcesWithEntityConfigs = %v, %v; want [gpt-4] (lib-key's config is still there)", res, err)
	if err := rl.DeleteLimits(ctx, "lib-key", "gpt-4"); err != nil {
		t.Fatal(err)
	}
	if res, _ := rl.ListResourcesWithEntityConfigs(ctx); len(res) != 0 {
		t.Errorf("ListResourcesWithEntityConfigs = %v after deleting the last config, want none", res)
	}
}
