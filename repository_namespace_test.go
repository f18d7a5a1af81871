package limiter

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// nsStateError asserts that err is a *NamespaceStateError in state with
// message msg.
func nsStateError(t *testing.T, err error, state, msg string) {
	t.Helper()
	var se *NamespaceStateError
	require.ErrorAs(t, err, &se, "err = %v, want *NamespaceStateError", err)
	require.ErrorIs(t, err, ErrNamespaceState)
	assert.Equal(t, state, se.State, "NamespaceStateError state")
	assert.Equal(t, msg, se.Message, "NamespaceStateError message")
}

// registry reads a raw registry record.
func (env *testEnv) registry(sk string) map[string]types.AttributeValue {
	return env.item(pkSystem(reservedNamespace), sk)
}

// gsi4Count counts the items of namespace id in GSI4.
func (env *testEnv) gsi4Count(id string) int {
	env.t.Helper()
	items, err := env.repo.queryAll(env.ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(env.repo.Table()),
		IndexName:                 aws.String(indexGSI4),
		KeyConditionExpression:    aws.String("GSI4PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(id)},
	})
	require.NoError(env.t, err)
	return len(items)
}

// fillNamespace opens namespace name on env's table and writes an entity
// with stored limits, a bucket and audit events into it.
func (env *testEnv) fillNamespace(name, entity string) *dynamoRepository {
	env.t.Helper()
	repo, err := env.repo.namespace(env.ctx, name)
	require.NoError(env.t, err)
	rl := New(repo, func(o *Options) { o.Clock = env.clock.now })
	_, err = rl.Admin().CreateEntity(env.ctx, Entity{ID: entity})
	require.NoError(env.t, err)
	require.NoError(env.t, rl.Admin().SetLimits(env.ctx, Scope{Entity: entity, Resource: "gpt"}, []Limit{PerMinute("rpm", 10)}))
	mustCommit(env.t, mustAcquire(env.t, rl, entity, "gpt", Consume{"rpm": 1}))
	return repo
}

func TestNamespaceRegisterGetList(t *testing.T) {
	env := newTestEnv(t)
	repo, ctx := env.repo, env.ctx

	id, err := repo.RegisterNamespace(ctx, "tenant-a")
	require.NoError(t, err)
	assert.Regexp(t, namespaceIDPattern, id, "id, want URL-safe characters")
	assert.Len(t, id, 11, "id = %q, want 11 characters", id)
	assert.False(t, strings.HasPrefix(id, "-"), "id = %q starts with '-'", id)
	again, err := repo.RegisterNamespace(ctx, "tenant-a")
	require.NoError(t, err, "second RegisterNamespace")
	require.Equal(t, id, again, "second RegisterNamespace, want the first id (idempotent)")
	// Idempotent also for another process, whose cache is cold.
	other := *repo
	other.shared = newSharedState(repo.opts)
	got, err := other.RegisterNamespace(ctx, "tenant-a")
	require.NoError(t, err, "RegisterNamespace from a cold cache")
	require.Equal(t, id, got, "RegisterNamespace from a cold cache")

	info, err := repo.GetNamespace(ctx, "tenant-a")
	require.NoError(t, err)
	want := store.NamespaceInfo{Name: "tenant-a", ID: id, Status: store.NamespaceStatusActive, CreatedAt: epoch.Truncate(1e9)}
	assert.Equal(t, want, info, "GetNamespace")
	_, err = repo.GetNamespace(ctx, "missing")
	var nf *NamespaceNotFoundError
	require.ErrorAs(t, err, &nf, "GetNamespace(missing)")
	require.Equal(t, "missing", nf.Namespace, "GetNamespace(missing): %v", err)
	require.ErrorIs(t, err, ErrNamespaceNotFound, "GetNamespace(missing)")

	ids, err := repo.RegisterNamespaces(ctx, "b", "c", "b", "tenant-a")
	require.NoError(t, err)
	assert.Len(t, ids, 3, "RegisterNamespaces = %v", ids)
	assert.Equal(t, id, ids["tenant-a"], "RegisterNamespaces = %v", ids)
	assert.NotEqual(t, ids["b"], ids["c"], "RegisterNamespaces = %v", ids)
	assert.NotEmpty(t, ids["b"], "RegisterNamespaces = %v", ids)
	list, err := repo.ListNamespaces(ctx)
	require.NoError(t, err)
	var names []string
	for _, ns := range list {
		names = append(names, ns.Name)
		assert.Equal(t, store.NamespaceStatusActive, ns.Status, "listed %+v", ns)
		assert.NotEmpty(t, ns.ID, "listed %+v", ns)
	}
	assert.Equal(t, []string{"b", "c", "default", "tenant-a"}, names, "ListNamespaces names")
	// Every registered namespace resolves, through the shared cache or the table.
	for name, id := range ids {
		scoped, err := repo.namespace(ctx, name)
		if assert.NoError(t, err, "Namespace(%s)", name) {
			assert.Equal(t, id, scoped.NamespaceID(), "Namespace(%s)", name)
		}
	}
}

// TestRegisterNamespaceConcurrently registers one name from several
// "processes" (repositories with cold caches) at once: all get one id.
func TestRegisterNamespaceConcurrently(t *testing.T) {
	env := newTestEnv(t)
	const n = 8
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		repo := *env.repo
		repo.shared = newSharedState(repo.opts)
		wg.Go(func() { ids[i], errs[i] = repo.RegisterNamespace(env.ctx, "contended") })
	}
	wg.Wait()
	for i := range n {
		assert.NoError(t, errs[i], "registration %d", i)
		assert.Equal(t, ids[0], ids[i], "registration %d", i)
	}
	orphans, err := env.repo.queryRegistry(env.ctx, skNSIDPrefix)
	assert.NoError(t, err, "reverse records")
	assert.Len(t, orphans, 2, "reverse records: want default and contended (no half-registered ids)")
}

// TestNamespaceIDNeverStartsWithDash registers a namespace while the random
// source first yields the bytes of "-AAAAAAAAAA": the id is drawn again.
func TestNamespaceIDNeverStartsWithDash(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	repo := *env.repo
	repo.nsIDSource = bytes.NewReader([]byte{0xF8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	id, err := repo.RegisterNamespace(env.ctx, "dashless")
	require.NoError(t, err)
	require.Equal(t, "AAECAwQFBgc", id, "RegisterNamespace, want the second draw")
	item := env.registry(skNSID("-AAAAAAAAAA"))
	assert.Len(t, item, 0, "a dash-prefixed id was written: %v", item)
	s, _ := schemaGetS(env.registry(skNamespace("dashless")), attrNamespaceID)
	assert.Equal(t, id, s, "forward record id = %q", s)
	// And over many random registrations none starts with '-'.
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("ns-%03d", i)
	}
	ids, err := env.repo.RegisterNamespaces(env.ctx, names...)
	require.NoError(t, err)
	for name, id := range ids {
		assert.False(t, strings.HasPrefix(id, "-"), "%s: id %q starts with '-'", name, id)
		assert.Regexp(t, namespaceIDPattern, id, "%s", name)
	}
}

func TestNamespaceDeleteRecoverPurge(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	repo, ctx := env.repo, env.ctx
	id, err := repo.RegisterNamespace(ctx, "tenant-a")
	require.NoError(t, err)
	env.fillNamespace("tenant-a", "user-1")
	items := env.gsi4Count(id)
	require.GreaterOrEqual(t, items, 5, "tenant-a's items in GSI4, want ≥ 5 (META, config, registry, bucket, audit)")

	// Delete: soft, idempotent, the name stops resolving at once.
	env.clock.advance(90 * 1e9)
	require.NoError(t, repo.DeleteNamespace(ctx, "tenant-a"))
	_, err = repo.GetNamespace(ctx, "tenant-a")
	assert.ErrorIs(t, err, ErrNamespaceNotFound, "GetNamespace after delete")
	_, err = repo.namespace(ctx, "tenant-a")
	assert.ErrorIs(t, err, ErrNamespaceNotFound, "Namespace after delete (name cache not dropped?)")
	assert.Len(t, env.registry(skNamespace("tenant-a")), 0, "forward record kept")
	rev := env.registry(skNSID(id))
	s, _ := schemaGetS(rev, attrStatus)
	assert.EqualValues(t, store.NamespaceStatusDeleted, s, "reverse status = %q", s)
	s, _ = schemaGetS(rev, attrDeletedAt)
	assert.EqualValues(t, "2026-01-02T03:05:35Z", s, "deleted_at = %q, want the clock's time", s)
	s, _ = schemaGetS(rev, attrCreatedAt)
	assert.EqualValues(t, "2026-01-02T03:04:05Z", s, "created_at = %q, want kept", s)
	got := env.gsi4Count(id)
	assert.Equal(t, items, got, "data items after soft delete = %d, want %d kept", got, items)
	for _, name := range []string{"tenant-a", "never-registered"} {
		err := repo.DeleteNamespace(ctx, name)
		assert.NoError(t, err, "DeleteNamespace(%s) = %v, want nil", name, err)
	}
	list, _ := repo.ListNamespaces(ctx)
	if assert.Len(t, list, 1, "ListNamespaces after delete = %+v", list) {
		assert.Equal(t, "default", list[0].Name, "ListNamespaces after delete")
	}
	orphans, err := repo.ListOrphanNamespaces(ctx)
	require.NoError(t, err)
	wantOrphan := store.NamespaceInfo{Name: "tenant-a", ID: id, Status: store.NamespaceStatusDeleted,
		CreatedAt: epoch.Truncate(1e9), DeletedAt: epoch.Add(90 * 1e9).Truncate(1e9)}
	assert.Equal(t, []store.NamespaceInfo{wantOrphan}, orphans, "ListOrphanNamespaces")

	// Recover: active again, with its data.
	name, err := repo.RecoverNamespace(ctx, id)
	require.NoError(t, err, "RecoverNamespace")
	require.Equal(t, "tenant-a", name, "RecoverNamespace")
	_, ok := env.registry(skNSID(id))[attrDeletedAt]
	assert.False(t, ok, "deleted_at kept after recovery")
	info, err := repo.GetNamespace(ctx, "tenant-a")
	assert.NoError(t, err, "GetNamespace after recovery")
	assert.Equal(t, id, info.ID, "GetNamespace after recovery = %+v", info)
	assert.WithinDuration(t, epoch.Truncate(1e9), info.CreatedAt, 0, "GetNamespace after recovery = %+v", info)
	scoped, err := repo.namespace(ctx, "tenant-a")
	require.NoError(t, err)
	_, err = scoped.GetEntity(ctx, "user-1")
	assert.NoError(t, err, "entity after recovery")
	_, err = repo.RecoverNamespace(ctx, id)
	nsStateError(t, err, "active", `namespace "tenant-a" is already active (not deleted)`)
	err = repo.PurgeNamespace(ctx, id)
	nsStateError(t, err, "active", `cannot purge active namespace "tenant-a": delete it first (DeleteNamespace)`)
	orphans, _ = repo.ListOrphanNamespaces(ctx)
	assert.Empty(t, orphans, "orphans after recovery")

	// Re-registered name: recovery refused, nothing changed.
	require.NoError(t, repo.DeleteNamespace(ctx, "tenant-a"))
	id2, err := repo.RegisterNamespace(ctx, "tenant-a")
	require.NoError(t, err, "re-register")
	require.NotEqual(t, id, id2, "re-register, want a new id")
	_, err = repo.RecoverNamespace(ctx, id)
	nsStateError(t, err, "re-registered",
		`cannot recover namespace "tenant-a": the name was registered again by another caller`)
	s, _ = schemaGetS(env.registry(skNSID(id)), attrStatus)
	assert.EqualValues(t, store.NamespaceStatusDeleted, s, "reverse status after refused recovery = %q, want deleted", s)
	s, _ = schemaGetS(env.registry(skNamespace("tenant-a")), attrNamespaceID)
	assert.Equal(t, id2, s, "forward record id = %q, want the new %q", s, id2)

	// Missing id: a typed not-found error.
	_, err = repo.RecoverNamespace(ctx, "AAAAAAAAAAA")
	var nf *NamespaceNotFoundError
	if assert.ErrorAs(t, err, &nf, "RecoverNamespace(unknown)") {
		assert.Equal(t, "AAAAAAAAAAA", nf.ID, "RecoverNamespace(unknown): %v", err)
	}
	assert.ErrorIs(t, err, ErrNamespaceNotFound, "RecoverNamespace(unknown)")
	assert.EqualError(t, err, `limiter: namespace id "AAAAAAAAAAA" not found`, "RecoverNamespace(unknown)")
	assert.NoError(t, repo.PurgeNamespace(ctx, "AAAAAAAAAAA"), "PurgeNamespace(unknown)")

	// Purge: data and reverse record gone; the live namespaces untouched.
	other := env.fillNamespace("tenant-a", "user-2") // the re-registered tenant-a
	defaultItems := env.gsi4Count(repo.NamespaceID())
	otherItems := env.gsi4Count(id2)
	require.NoError(t, repo.PurgeNamespace(ctx, id))
	got = env.gsi4Count(id)
	assert.EqualValues(t, 0, got, "%d items left after purge", got)
	assert.Len(t, env.item(pkEntity(id, "user-1"), skMeta), 0, "META of the purged namespace left")
	assert.Len(t, env.registry(skNSID(id)), 0, "reverse record left after purge")
	got = env.gsi4Count(repo.NamespaceID())
	assert.Equal(t, defaultItems, got, "default namespace items %d, want %d", got, defaultItems)
	got = env.gsi4Count(id2)
	assert.Equal(t, otherItems, got, "re-registered tenant-a items %d, want %d", got, otherItems)
	_, err = other.GetEntity(ctx, "user-2")
	assert.NoError(t, err, "entity of the live namespace")
	assert.NotEmpty(t, env.item("_/SYSTEM#", "#VERSION"), "version record purged")
	_, err = repo.RecoverNamespace(ctx, id)
	assert.ErrorIs(t, err, ErrNamespaceNotFound, "RecoverNamespace after purge")
}

// TestNamespacePurgingIsTerminal checks the purging state: an interrupted
// purge is listed, cannot be recovered and is resumed by PurgeNamespace.
func TestNamespacePurgingIsTerminal(t *testing.T) {
	env := newTestEnv(t)
	repo, ctx := env.repo, env.ctx
	id, err := repo.RegisterNamespace(ctx, "doomed")
	require.NoError(t, err)
	env.fillNamespace("doomed", "u")
	require.NoError(t, repo.DeleteNamespace(ctx, "doomed"))
	// A purge that died after marking the namespace.
	_, err = env.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(repo.Table()), Key: registryKey(skNSID(id)),
		UpdateExpression:          aws.String("SET #s = :p"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": schemaS("purging")},
	})
	require.NoError(t, err)
	_, err = repo.RecoverNamespace(ctx, id)
	nsStateError(t, err, "purging", `cannot recover namespace "doomed": its purge is in progress, and purging is terminal`)
	orphans, err := repo.ListOrphanNamespaces(ctx)
	require.NoError(t, err, "ListOrphanNamespaces")
	require.Len(t, orphans, 1, "ListOrphanNamespaces = %+v, want the purging namespace", orphans)
	require.Equal(t, store.NamespaceStatusPurging, orphans[0].Status, "ListOrphanNamespaces = %+v", orphans)
	require.Equal(t, id, orphans[0].ID, "ListOrphanNamespaces = %+v", orphans)
	env.rec.Reset()
	require.NoError(t, repo.PurgeNamespace(ctx, id))
	n := env.rec.Count("UpdateItem")
	assert.EqualValues(t, 0, n, "resumed purge re-marked the namespace (%d UpdateItem)", n)
	got := env.gsi4Count(id)
	assert.EqualValues(t, 0, got, "%d items left", got)
	orphans, _ = repo.ListOrphanNamespaces(ctx)
	assert.Empty(t, orphans, "orphans after purge")
}

// partialBatchClient passes every call to DynamoDB Local, except that every
// other BatchWriteItem sends only the first half of its requests and returns
// the rest as UnprocessedItems, as DynamoDB does under load.
type partialBatchClient struct {
	DynamoDBClient

	mu      sync.Mutex // guards partial
	partial bool
}

func (c *partialBatchClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.mu.Lock()
	c.partial = !c.partial
	partial := c.partial
	c.mu.Unlock()
	if !partial {
		return c.DynamoDBClient.BatchWriteItem(ctx, in, optFns...)
	}
	sent := map[string][]types.WriteRequest{}
	held := map[string][]types.WriteRequest{}
	for table, reqs := range in.RequestItems {
		half := (len(reqs) + 1) / 2
		sent[table], held[table] = reqs[:half], reqs[half:]
	}
	out, err := c.DynamoDBClient.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: sent}, optFns...)
	if err != nil {
		return nil, err
	}
	if out.UnprocessedItems == nil {
		out.UnprocessedItems = map[string][]types.WriteRequest{}
	}
	for table, reqs := range held {
		if len(reqs) > 0 {
			out.UnprocessedItems[table] = append(out.UnprocessedItems[table], reqs...)
		}
	}
	return out, nil
}

// TestPurgeNamespaceManyItems purges a namespace of more than 25 items read
// through several GSI4 pages (forced small with a client hook), with
// BatchWriteItem leaving items unprocessed, and checks that everything of
// it and nothing else is deleted.
func TestPurgeNamespaceManyItems(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	id, err := env.repo.RegisterNamespace(ctx, "big")
	require.NoError(t, err)
	big, err := env.repo.namespace(ctx, "big")
	require.NoError(t, err)
	rl := New(big, func(o *Options) { o.Clock = env.clock.now })
	for i := range 20 {
		e := fmt.Sprintf("user-%02d", i)
		_, err := rl.Admin().CreateEntity(ctx, Entity{ID: e}) // META + audit event
		require.NoError(t, err)
		mustCommit(t, mustAcquire(t, rl, e, "gpt", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 5)))) // bucket
	}
	env.fillNamespace("default", "keeper")
	keep := env.gsi4Count(env.repo.NamespaceID())
	total := env.gsi4Count(id)
	require.GreaterOrEqual(t, total, 60, "big's items")
	require.NoError(t, env.repo.DeleteNamespace(ctx, "big"))

	purger := env.withClient(hook(func(op string, params any) error {
		if in, ok := params.(*dynamodb.QueryInput); ok && aws.ToString(in.IndexName) == indexGSI4 {
			in.Limit = aws.Int32(7) // force many pages
		}
		return nil
	}))
	purger.client = &partialBatchClient{DynamoDBClient: purger.client}
	env.rec.Reset()
	require.NoError(t, purger.PurgeNamespace(ctx, id))
	got := env.gsi4Count(id)
	assert.EqualValues(t, 0, got, "%d items left after purge", got)
	got = env.gsi4Count(env.repo.NamespaceID())
	assert.Equal(t, keep, got, "default namespace has %d items, want %d", got, keep)
	pages, batches, deleted := 0, 0, 0
	for _, c := range env.rec.Calls() {
		switch c.Op {
		case "Query":
			pages++
		case "BatchWriteItem":
			batches++
			deleted += c.Items
			assert.LessOrEqual(t, c.Items, maxBatchWriteItems, "items of one BatchWriteItem")
		}
	}
	want := (total + 6) / 7
	assert.GreaterOrEqual(t, pages, want, "GSI4 pages")
	assert.Equal(t, total, deleted, "items deleted by BatchWriteItem")
	assert.Greater(t, batches, (total+6)/7, "BatchWriteItem calls, want more than one per page (re-sent halves)")
}

func TestNamespaceValidation(t *testing.T) {
	env := newTestEnv(t)
	repo, ctx := env.repo, env.ctx
	env.rec.Reset()
	ignoreStr := func(_ string, err error) error { return err }
	for name, err := range map[string]error{
		"register reserved":    ignoreStr(repo.RegisterNamespace(ctx, "_")),
		"register empty":       ignoreStr(repo.RegisterNamespace(ctx, "")),
		"register many":        func() error { _, err := repo.RegisterNamespaces(ctx, "fine", "_"); return err }(),
		"get reserved":         func() error { _, err := repo.GetNamespace(ctx, "_"); return err }(),
		"get empty":            func() error { _, err := repo.GetNamespace(ctx, ""); return err }(),
		"delete reserved":      repo.DeleteNamespace(ctx, "_"),
		"delete empty":         repo.DeleteNamespace(ctx, ""),
		"recover empty id":     ignoreStr(repo.RecoverNamespace(ctx, "")),
		"recover reserved id":  ignoreStr(repo.RecoverNamespace(ctx, "_")),
		"recover malformed id": ignoreStr(repo.RecoverNamespace(ctx, "a/b#c")),
		"purge empty id":       repo.PurgeNamespace(ctx, ""),
		"purge reserved id":    repo.PurgeNamespace(ctx, "_"),
		"purge malformed id":   repo.PurgeNamespace(ctx, "bad id!"),
		"purge overlong id":    repo.PurgeNamespace(ctx, strings.Repeat("a", 65)),
	} {
		var ve *ValidationError
		assert.ErrorAs(t, err, &ve, "%s", name)
		assert.ErrorIs(t, err, ErrValidation, "%s", name)
	}
	assert.Zero(t, env.rec.Count(""), "DynamoDB calls caused by invalid input: %s", env.calls())
	_, err := repo.GetNamespace(ctx, "fine")
	assert.ErrorIs(t, err, ErrNamespaceNotFound, "RegisterNamespaces registered %q before validating every name: %v", "fine", err)
	var ve *ValidationError
	err = repo.DeleteNamespace(ctx, "_")
	assert.ErrorAs(t, err, &ve, "DeleteNamespace(_)")
	assert.EqualError(t, err, "limiter: invalid namespace: reserved for system use", "DeleteNamespace(_)")

	// A reverse record carrying the reserved name (written by hand) cannot
	// be recovered.
	rec := namespaceRecord{ID: "HANDMADE123", Name: "_", Status: namespaceDeleted, CreatedAt: epoch}
	_, err = env.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(repo.Table()), Item: namespaceReverseItem(rec),
	})
	require.NoError(t, err)
	_, err = repo.RecoverNamespace(ctx, "HANDMADE123")
	ve = nil
	if assert.ErrorAs(t, err, &ve, "RecoverNamespace(reserved name)") {
		assert.Equal(t, "namespace", ve.Field, "RecoverNamespace(reserved name): %v", err)
	}
	assert.Len(t, env.registry(skNamespace("_")), 0, "forward record for '_' written")
}

func TestNamespaceStatusConstants(t *testing.T) {
	t.Parallel()
	assert.Equal(t, namespaceActive, store.NamespaceStatusActive, "exported namespace status differs from the schema's")
	assert.Equal(t, namespaceDeleted, store.NamespaceStatusDeleted, "exported namespace status differs from the schema's")
	assert.Equal(t, namespacePurging, store.NamespaceStatusPurging, "exported namespace status differs from the schema's")
	for _, tc := range []struct {
		err  *NamespaceNotFoundError
		want string
	}{
		{&NamespaceNotFoundError{Namespace: "t1"}, `limiter: namespace "t1" not found (register it first)`},
		{&NamespaceNotFoundError{ID: "abc"}, `limiter: namespace id "abc" not found`},
	} {
		got := tc.err.Error()
		assert.Equal(t, tc.want, got, "Error() = %q, want %q", got, tc.want)
	}
}

// TestNamespaceCacheBounded: the namespace cache holds at most
// NamespaceCacheSize names, and trusts an id for NamespaceCacheTTL: past
// it, a namespace another process deleted is seen as gone.
func TestNamespaceCacheBounded(t *testing.T) {
	env := newTestEnv(t, func(o *DynamoDBOptions) { o.NamespaceCacheSize, o.NamespaceCacheTTL = 2, time.Minute })
	ctx := env.ctx
	for _, name := range []string{"tenant-a", "tenant-b", "tenant-c"} {
		_, err := env.repo.RegisterNamespace(ctx, name)
		require.NoError(t, err)
	}
	env.repo.shared.mu.Lock()
	held := env.repo.shared.nsIDs.Len()
	env.repo.shared.mu.Unlock()
	require.EqualValues(t, 2, held, "namespace cache holds %d names, want 2 (its ceiling)", held)
	other := *env.repo // another process: a cold cache
	other.shared = newSharedState(env.repo.opts)
	err := other.DeleteNamespace(ctx, "tenant-c")
	require.NoError(t, err)
	_, err = env.repo.namespace(ctx, "tenant-c")
	require.NoError(t, err, "Namespace within the age limit: %v, want the cached id", err)
	env.clock.advance(time.Minute + time.Millisecond)
	var nf *NamespaceNotFoundError
	_, err = env.repo.namespace(ctx, "tenant-c")
	require.ErrorAs(t, err, &nf, "Namespace past the age limit")
	// An evicted name is read again.
	ns, err := env.repo.namespace(ctx, "default")
	require.NoError(t, err, "Namespace(default)")
	require.Equal(t, env.repo.NamespaceID(), ns.NamespaceID(), "Namespace(default)")
}
