package provisioner_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// responses is CloudFormation's side of the protocol: a server on loopback
// that records the answers PUT to the events' ResponseURL.
type responses struct {
	mu  sync.Mutex
	got []cfn.Response
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
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	admin, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table, o.Namespace, o.CreateTable = table, "tenant-a", true
	})
	require.NoError(t, err)
	rl := limiter.New(admin, limiter.WithConfigCacheTTL(0))
	// A limit the resource never declared: never touched.
	require.NoError(t, rl.SetResourceDefaults(ctx, "other", []limiter.Limit{limiter.PerMinute("rpm", 7)}))

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

	sys, ou, err := rl.GetSystemDefaults(ctx)
	require.NoError(t, err)
	assert.Equal(t, limiter.OnUnavailableBlock, ou)
	assert.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 100_000)}, sys)
	got, err := rl.GetResourceDefaults(ctx, "embed")
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 2000)}, got)
	got, err = rl.GetLimits(ctx, "key-1", "gpt-4o")
	require.NoError(t, err)
	want, err := limiter.NewLimit("rpm", 50, 25, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{want}, got)
	got, err = rl.GetLimits(ctx, "key-2", limiter.DefaultResource)
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 10)}, got)
	// Audited as the stack.
	events, err := rl.AuditEvents(ctx, store.AuditEntitySystem, 10, "")
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
	sys, ou, err = rl.GetSystemDefaults(ctx)
	require.NoError(t, err)
	assert.Empty(t, sys)
	assert.Empty(t, ou)
	got, err = rl.GetResourceDefaults(ctx, "gpt-4o")
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 800)}, got)
	got, err = rl.GetResourceDefaults(ctx, "embed")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = rl.GetLimits(ctx, "key-1", "gpt-4o")
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 60)}, got)
	got, err = rl.GetLimits(ctx, "key-2", limiter.DefaultResource)
	require.NoError(t, err)
	assert.Empty(t, got)

	// Delete removes what the resource declares, nothing else.
	resp = send(t, h, r, event(t, "delete", table, r.srv.URL))
	require.Equal(t, cfn.StatusSuccess, resp.Status, resp.Reason)
	assert.EqualValues(t, 2, resp.Data["Deleted"])
	got, err = rl.GetResourceDefaults(ctx, "gpt-4o")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = rl.GetLimits(ctx, "key-1", "gpt-4o")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = rl.GetResourceDefaults(ctx, "other")
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
