package provisioner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/faultproxy"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// responses is CloudFormation's side of the protocol: a server on loopback
// that records the answers PUT to the events' ResponseURL.
type responses struct {
	mu  sync.Mutex
	got []cfn.Response
	at  []time.Time // when each answer arrived
	srv *httptest.Server
}

func newResponses(t *testing.T) *responses {
	r := &responses{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPut {
			http.Error(w, "want PUT", http.StatusMethodNotAllowed)
			return
		}
		var resp cfn.Response
		body, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(body, &resp); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, resp)
		r.at = append(r.at, time.Now())
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *responses) last(t *testing.T) cfn.Response {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.got, "no answer reached the ResponseURL")
	return r.got[len(r.got)-1]
}

// lastAt returns when the last answer arrived.
func (r *responses) lastAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) == 0 {
		return time.Time{}
	}
	return r.at[len(r.at)-1]
}

// event reads testdata/NAME.json, a CloudFormation event, with its
// placeholders replaced.
func event(t *testing.T, name, table, responseURL string) cfn.Event {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".json")
	require.NoError(t, err)
	s := strings.NewReplacer("RESPONSE_URL", responseURL, "TABLE_NAME", table).Replace(string(b))
	var ev cfn.Event
	require.NoError(t, json.Unmarshal([]byte(s), &ev))
	return ev
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a safety net: DynamoDB Local is slow on a loaded machine
	t.Cleanup(cancel)
	return ctx
}

// openAdmin returns a DynamoDB Local client, a new table created through
// the library, and a repository on namespace ns of it.
func openAdmin(t *testing.T, ns string) (*dynamodb.Client, string, *limiter.DynamoDBRepository) {
	t.Helper()
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	admin, err := limiter.OpenDynamoDB(testContext(t), client, func(o *limiter.DynamoDBOptions) {
		o.Table, o.Namespace, o.CreateTable = table, ns, true
	})
	require.NoError(t, err)
	return client, table, admin
}

// send runs the event through the Lambda's wrapped handler and returns
// the answer CloudFormation received.
func send(t *testing.T, h *provisioner.Handler, r *responses, ev cfn.Event) cfn.Response {
	t.Helper()
	_, err := cfn.LambdaWrap(h.Handle)(testContext(t), ev)
	require.NoError(t, err, "the answer could not be sent")
	return r.last(t)
}

func TestCreateUpdateDelete(t *testing.T) {
	ctx := testContext(t)
	client, table, admin := openAdmin(t, "tenant-a")
	rl := limiter.New(admin, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	// A limit the resource never declared: never touched.
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "other"}, []limiter.Limit{limiter.PerMinute("rpm", 7)}))

	h := &provisioner.Handler{Client: client}
	r := newResponses(t)
	physical := provisioner.PhysicalID(table, "tenant-a")

	resp := send(t, h, r, event(t, "create", table, r.srv.URL))
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.Equal(t, physical, resp.PhysicalResourceID)
	assert.Equal(t, "d6f3c1a2-1111-4a4b-9c9d-0e1f2a3b4c5d", resp.RequestID)
	assert.Equal(t, "TenantLimits", resp.LogicalResourceID)
	assert.EqualValues(t, 5, resp.Data["Stored"])
	assert.Equal(t, admin.NamespaceID(), resp.Data["NamespaceId"])

	sys, ou, err := rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	assert.Equal(t, limiter.OnUnavailableBlock, ou)
	assert.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 100_000)}, sys)
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: "embed"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 2000)}, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	want := limiter.Limit{Name: "rpm", Capacity: 50, RefillAmount: 25, RefillPeriod: 30 * time.Second}
	err = want.Validate()
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{want}, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-2", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 10)}, got)
	// Audited as the stack.
	events, err := iterx.Collect(rl.Admin().AuditEvents(ctx, store.AuditEntitySystem))
	require.NoError(t, err)
	require.NotEmpty(t, events)
	assert.Contains(t, events[0].Principal, "arn:aws:cloudformation:")

	// Update: gpt-4o and key-1 change; the system defaults, embed and
	// key-2 were dropped and are deleted.
	resp = send(t, h, r, event(t, "update", table, r.srv.URL))
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.Equal(t, physical, resp.PhysicalResourceID)
	assert.EqualValues(t, 2, resp.Data["Stored"])
	assert.EqualValues(t, 3, resp.Data["Deleted"])
	sys, ou, err = rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	assert.Empty(t, sys)
	assert.Empty(t, ou)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 800)}, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: "embed"})
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 60)}, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-2", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	assert.Empty(t, got)

	// Delete removes what the resource declares, nothing else.
	resp = send(t, h, r, event(t, "delete", table, r.srv.URL))
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.EqualValues(t, 2, resp.Data["Deleted"])
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: "other"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 7)}, got, "a limit the resource never declared was touched")
}

func TestFailedAnswers(t *testing.T) {
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	h := &provisioner.Handler{Client: client}
	r := newResponses(t)

	ev := event(t, "create", table, r.srv.URL)
	ev.ResourceProperties["Resources"] = map[string]any{"gpt-4o": map[string]any{"Limits": map[string]any{"rpm": map[string]any{"Capacity": "lots"}}}}
	resp := send(t, h, r, ev)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.Contains(t, resp.Reason, "lots")

	ev = event(t, "create", table, r.srv.URL)
	ev.ResourceProperties["System"] = map[string]any{"OnUnavailable": "maybe"}
	resp = send(t, h, r, ev)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.Contains(t, resp.Reason, "OnUnavailable")

	// The table does not exist: Create fails with the reason.
	ev = event(t, "create", "no-such-table", r.srv.URL)
	resp = send(t, h, r, ev)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.NotEmpty(t, resp.Reason)
	assert.Equal(t, ev.RequestID, resp.PhysicalResourceID, "a failed create answers a physical ID of its own")

	// Deleting it (CloudFormation rolls back) succeeds and touches nothing.
	del := event(t, "delete", "no-such-table", r.srv.URL)
	del.PhysicalResourceID = ev.RequestID
	resp = send(t, h, r, del)
	assert.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)

	// A delete of a resource on a table that is gone succeeds too.
	del = event(t, "delete", "no-such-table", r.srv.URL)
	resp = send(t, h, r, del)
	assert.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)

	// Another resource type is refused.
	ev = event(t, "create", table, r.srv.URL)
	ev.ResourceType = "Custom::Other"
	resp = send(t, h, r, ev)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
}

func TestParseProperties(t *testing.T) {
	p, err := provisioner.ParseProperties(map[string]any{
		"System": map[string]any{"Limits": map[string]any{"rpm": map[string]any{"Capacity": 5, "RefillPeriod": "1"}}},
	}, "fallback")
	require.NoError(t, err)
	assert.Equal(t, "fallback", p.TableName)
	assert.Equal(t, limiter.DefaultNamespace, p.Namespace)
	assert.EqualValues(t, 5, p.System.Limits["rpm"].Capacity)
	assert.EqualValues(t, 1, p.System.Limits["rpm"].RefillPeriod)
	_, err = provisioner.ParseProperties(map[string]any{}, "")
	assert.ErrorContains(t, err, "TableName")
}

// manifest returns the properties of a Create of namespace ns in table:
// system defaults, resource defaults of gpt-4o and embed, and one limit
// for each of the entities given, on gpt-4o.
func manifest(table, ns string, entities ...string) map[string]any {
	rpm := func(n int) map[string]any {
		return map[string]any{"Limits": map[string]any{"rpm": map[string]any{"Capacity": fmt.Sprint(n)}}}
	}
	ents := map[string]any{}
	for _, id := range entities {
		ents[id] = map[string]any{"Resources": map[string]any{"gpt-4o": rpm(10)}}
	}
	return map[string]any{
		"TableName": table, "Namespace": ns,
		"System":    map[string]any{"OnUnavailable": "block", "Limits": map[string]any{"rpm": map[string]any{"Capacity": "1000"}}},
		"Resources": map[string]any{"gpt-4o": rpm(500), "embed": rpm(2000)},
		"Entities":  ents,
	}
}

// storedItems returns the keys of every item of the table outside the
// shared prefix and outside namespace except (the test's own), read
// table-wide.
func storedItems(t *testing.T, client *dynamodb.Client, table, except string) []string {
	t.Helper()
	out, err := client.Scan(testContext(t), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	var keys []string
	for _, item := range out.Items {
		pk := item["PK"].(*types.AttributeValueMemberS).Value
		sk := item["SK"].(*types.AttributeValueMemberS).Value
		if strings.HasPrefix(pk, "_/") || strings.HasPrefix(pk, except+"/") {
			continue
		}
		keys = append(keys, pk+" "+sk)
	}
	slices.Sort(keys)
	return keys
}

// TestBadNameStoresNothing: a manifest whose entities include names the
// library refuses is refused whole before the first write — not even the
// namespace is registered — with every problem in the reason and a
// physical ID of its own; CloudFormation's rollback Delete of it succeeds.
// A Delete under the resource's ID whose properties name entities that
// cannot exist deletes the others and succeeds; an Update to such
// properties changes nothing, and its rollback neither.
func TestBadNameStoresNothing(t *testing.T) {
	ctx := testContext(t)
	client, table, admin := openAdmin(t, "admin")
	h := &provisioner.Handler{Client: client}
	r := newResponses(t)

	ev := event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = manifest(table, "tenant-a", "key-1", "zz#bad", "zz bad", "ünïcode", "key-9")
	resp := send(t, h, r, ev)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.Equal(t, ev.RequestID, resp.PhysicalResourceID, "a create that wrote nothing answers an ID of its own")
	for _, bad := range []string{"Entities.zz#bad: ", "Entities.zz bad: ", "Entities.ünïcode: "} {
		assert.Contains(t, resp.Reason, bad)
	}
	assert.NotContains(t, resp.Reason, "key-1")
	assert.Empty(t, storedItems(t, client, table, admin.NamespaceID()), "a refused manifest stored something")
	_, err := admin.GetNamespace(ctx, "tenant-a")
	assert.ErrorIs(t, err, limiter.ErrNamespaceNotFound, "the namespace was registered")

	// Other problems are found too, all at once.
	ev = event(t, "create", table, r.srv.URL)
	props := manifest(table, "tenant-a", "key-1")
	props["Resources"] = map[string]any{"_default_": map[string]any{"Limits": map[string]any{"rpm": map[string]any{"Capacity": "5"}}},
		"gpt-4o": map[string]any{"Limits": map[string]any{"r#m": map[string]any{"Capacity": "5"}, "tpm": map[string]any{"Capacity": "0"}}}}
	props["System"] = map[string]any{"OnUnavailable": "maybe"}
	ev.ResourceProperties = props
	resp = send(t, h, r, ev)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	for _, want := range []string{"Resources._default_: ", "Resources.gpt-4o.Limits.r#m: ", "Resources.gpt-4o.Limits.tpm: Capacity", `System.OnUnavailable "maybe"`} {
		assert.Contains(t, resp.Reason, want)
	}
	assert.Empty(t, storedItems(t, client, table, admin.NamespaceID()))

	// The rollback deletes the failed create: nothing to do.
	del := event(t, "delete", table, r.srv.URL)
	del.ResourceProperties = manifest(table, "tenant-a", "key-1", "zz#bad")
	del.PhysicalResourceID = resp.PhysicalResourceID
	resp = send(t, h, r, del)
	assert.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.Empty(t, storedItems(t, client, table, admin.NamespaceID()))

	// A valid create, then an update to a manifest with a bad name: the
	// update fails before writing and keeps the resource's ID; its
	// rollback (the old properties as the new ones) succeeds and deletes
	// nothing.
	physical := provisioner.PhysicalID(table, "tenant-a")
	ev = event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = manifest(table, "tenant-a", "key-1")
	resp = send(t, h, r, ev)
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	stored := storedItems(t, client, table, admin.NamespaceID())
	require.NotEmpty(t, stored)
	up := event(t, "update", table, r.srv.URL)
	up.ResourceProperties, up.OldResourceProperties = manifest(table, "tenant-a", "key-2", "zz#bad"), manifest(table, "tenant-a", "key-1")
	resp = send(t, h, r, up)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.Equal(t, physical, resp.PhysicalResourceID)
	up.ResourceProperties, up.OldResourceProperties = up.OldResourceProperties, up.ResourceProperties
	resp = send(t, h, r, up)
	assert.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.EqualValues(t, 0, resp.Data["Deleted"])
	assertSameConfigs(t, stored, storedItems(t, client, table, admin.NamespaceID()))

	// A Delete under the resource's ID whose properties also name entities
	// that cannot exist (as a resource created by an older provisioner
	// may): the others are deleted, and it succeeds.
	del = event(t, "delete", table, r.srv.URL)
	del.ResourceProperties = manifest(table, "tenant-a", "key-1", "zz#bad", "ünïcode")
	resp = send(t, h, r, del)
	assert.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.EqualValues(t, 4, resp.Data["Deleted"], "system, two resources, key-1")
	tenant, err := admin.Namespace(ctx, "tenant-a")
	require.NoError(t, err)
	rl := limiter.New(tenant, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	sys, ou, err := rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	assert.Empty(t, sys)
	assert.Empty(t, ou)
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Empty(t, got)
}

// assertSameConfigs checks that the config items (SK #CONFIG…) among the
// stored keys are the same.
func assertSameConfigs(t *testing.T, want, got []string) {
	t.Helper()
	configs := func(keys []string) []string {
		var out []string
		for _, k := range keys {
			if strings.Contains(k, " #CONFIG") {
				out = append(out, k)
			}
		}
		return out
	}
	assert.Equal(t, configs(want), configs(got))
}

// TestDeadlineStopsWriting: a Create of a manifest with 300 entities runs
// with a deadline; the system defaults are written, then every entity's
// write hangs (faultproxy holds TransactWriteItems). Margin before the
// deadline the handler cancels the write in flight and answers FAILED with
// how far it got, before the deadline, under the resource's ID (something
// was stored); CloudFormation's rollback Delete then removes what was
// stored and succeeds, reading past what never was.
func TestDeadlineStopsWriting(t *testing.T) {
	ctx := testContext(t)
	_, table, admin := openAdmin(t, "tenant-a")
	fp := faultproxy.Start(t, ddblocal.Endpoint(t))
	fp.Add(faultproxy.Rule{Op: "TransactWriteItems", Kind: faultproxy.Hang})
	const margin = 3 * time.Second
	h := &provisioner.Handler{Client: ddblocal.NewClient(fp.URL), Margin: margin}
	r := newResponses(t)

	entities := make([]string, 300)
	for i := range entities {
		entities[i] = fmt.Sprintf("key-%03d", i)
	}
	props := manifest(table, "tenant-a", entities...)
	delete(props, "Resources")
	ev := event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = props
	deadline := time.Now().Add(margin + 2*time.Second)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, err := cfn.LambdaWrap(h.Handle)(dctx, ev)
	require.NoError(t, err, "the answer could not be sent")
	resp := r.last(t)
	assert.True(t, r.lastAt().Before(deadline), "answered at %v, after the deadline %v", r.lastAt(), deadline)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.Contains(t, resp.Reason, provisioner.ErrDeadline.Error())
	assert.Contains(t, resp.Reason, "after 1 of 301 changes (1 stored, 0 deleted)")
	assert.Equal(t, provisioner.PhysicalID(table, "tenant-a"), resp.PhysicalResourceID, "something was stored: the rollback must delete it")
	assert.EqualValues(t, 1, resp.Data["Stored"])
	assert.Positive(t, fp.Faults("TransactWriteItems"), "no entity write was held")
	rl := limiter.New(admin, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	sys, _, err := rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, sys, "the system defaults, written first")

	// The rollback, with the function's time.
	fp.Clear()
	fp.Release()
	del := event(t, "delete", table, r.srv.URL)
	del.ResourceProperties = props
	del.PhysicalResourceID = resp.PhysicalResourceID
	resp = send(t, h, r, del)
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	sys, ou, err := rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	assert.Empty(t, sys)
	assert.Empty(t, ou)
	ids, err := iterx.Collect(rl.Admin().EntitiesWithLimits(ctx, "gpt-4o"))
	require.NoError(t, err)
	assert.Empty(t, ids)

	// A run that starts within the margin writes nothing at all and
	// answers an ID of its own.
	ev = event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = manifest(table, "tenant-b")
	dctx, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = cfn.LambdaWrap(h.Handle)(dctx, ev)
	require.NoError(t, err)
	resp = r.last(t)
	assert.Equal(t, cfn.StatusFailed, resp.Status)
	assert.Contains(t, resp.Reason, "after 0 of 3 changes")
	assert.Equal(t, ev.RequestID, resp.PhysicalResourceID)
	_, err = admin.GetNamespace(ctx, "tenant-b")
	assert.ErrorIs(t, err, limiter.ErrNamespaceNotFound)
}

// TestCalendarLimits: calendar limits (Calendar, Timezone) are stored as
// declared, and a declaration the library would refuse fails the whole
// event before anything is written.
func TestCalendarLimits(t *testing.T) {
	ctx := testContext(t)
	client, table, admin := openAdmin(t, "tenant-a")
	rl := limiter.New(admin, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	h := &provisioner.Handler{Client: client}
	r := newResponses(t)

	ev := event(t, "create", table, r.srv.URL)
	ev.ResourceProperties = map[string]any{
		"TableName": table, "Namespace": "tenant-a",
		"Resources": map[string]any{"gpt-4o": map[string]any{"Limits": map[string]any{
			"rpm": map[string]any{"Capacity": "600"},
			"usd": map[string]any{"Capacity": "500000000", "Calendar": "month", "Timezone": "America/New_York"},
			"rpd": map[string]any{"Capacity": 5000, "Calendar": "day"},
		}}},
	}
	resp := send(t, h, r, ev)
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	ny, err := store.LoadCalendarLocation("America/New_York")
	require.NoError(t, err)
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{
		limiter.PerMinute("rpm", 600),
		limiter.PerCalendarMonth("usd", 500_000_000).InLocation(ny),
		limiter.PerCalendarDay("rpd", 5000),
	}, got)

	for _, tc := range []struct {
		decl map[string]any
		want string
	}{
		{map[string]any{"Capacity": 5, "Calendar": "year"}, `Resources.embed.Limits.usd: calendar "year": use day, week or month`},
		{map[string]any{"Capacity": 5, "Calendar": "day", "RefillPeriod": 60}, "Resources.embed.Limits.usd: a calendar limit resets each period"},
		{map[string]any{"Capacity": 5, "Calendar": "day", "Timezone": "Mars/Olympus"}, `Resources.embed.Limits.usd: timezone "Mars/Olympus"`},
		{map[string]any{"Capacity": 5, "Timezone": "Europe/Paris"}, "Resources.embed.Limits.usd: Timezone is only for a calendar limit"},
	} {
		ev := event(t, "create", table, r.srv.URL)
		ev.ResourceProperties = map[string]any{
			"TableName": table, "Namespace": "tenant-a",
			"Resources": map[string]any{"embed": map[string]any{"Limits": map[string]any{"usd": tc.decl}}},
		}
		resp := send(t, h, r, ev)
		require.Equal(t, cfn.StatusFailed, resp.Status, tc.want)
		require.Contains(t, resp.Reason, tc.want)
		got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: "embed"})
		require.NoError(t, err)
		require.Empty(t, got, tc.want)
	}
}
