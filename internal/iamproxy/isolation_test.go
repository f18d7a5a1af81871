package iamproxy_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/iamproxy"
	"github.com/zaelimiter/limiter/internal/iterx"
)

// The isolation tests run the limiter through iamproxy under the template's
// namespace-scoped policies: what a tenant's principal does in its own
// namespace works, what it tries on another tenant's items is refused by
// the policy and surfaces as an error.

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

const (
	nsA = "tenant-a"
	nsB = "tenant-b"
	res = "gpt-4o"
)

// tenants is a table with two namespaces, each with limits and a cascading
// parent and child, set up without any policy.
type tenants struct {
	table    string
	idA, idB string
	tpl      *iamproxy.Template
	hashKeys map[string]string
}

func setUpTenants(t *testing.T) *tenants {
	t.Helper()
	ctx := testContext(t)
	admin := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	tn := &tenants{table: table}
	for _, ns := range []string{nsA, nsB} {
		repo, err := limiter.OpenDynamoDB(ctx, admin, func(o *limiter.DynamoDBOptions) {
			o.Table, o.Namespace, o.CreateTable = table, ns, true
		})
		require.NoError(t, err)
		if ns == nsA {
			tn.idA = repo.NamespaceID()
		} else {
			tn.idB = repo.NamespaceID()
		}
		rl := limiter.New(repo)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{
			limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 100_000),
		}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{
			limiter.PerMinute("rpm", 500), limiter.PerMinute("tpm", 50_000),
		}))
		for _, e := range []limiter.Entity{{ID: "org"}, {ID: "key-1", ParentID: "org", Cascade: true}, {ID: "solo"}} {
			_, err := rl.Admin().CreateEntity(ctx, e)
			require.NoError(t, err)
		}
		// B's buckets exist, so that a refused write is not merely a
		// missing item.
		for _, id := range []string{"key-1", "solo"} {
			l, err := rl.Acquire(ctx, id, res, limiter.Consume{"rpm": 1})
			require.NoError(t, err)
			require.NoError(t, l.Commit(ctx))
		}
	}
	require.NotEqual(t, tn.idA, tn.idB)
	var err error
	tn.tpl, err = iamproxy.ParseTemplate(infra.Template(), iamproxy.Stack{Name: table})
	require.NoError(t, err)
	tn.hashKeys, err = tn.tpl.IndexHashKeys("RateLimitsTable")
	require.NoError(t, err)
	return tn
}

// proxy starts a proxy for a principal tagged with namespace id nsID under
// the template's policies named.
func (tn *tenants) proxy(t *testing.T, nsID string, policies ...string) *iamproxy.Proxy {
	t.Helper()
	p := iamproxy.Principal{
		ARN:  "arn:aws:sts::123456789012:assumed-role/tenant/" + nsID,
		Tags: map[string]string{"zael_namespace_id": nsID},
	}
	for _, name := range policies {
		pol, err := tn.tpl.Policy(name)
		require.NoError(t, err)
		p.Policies = append(p.Policies, pol)
	}
	return iamproxy.Start(t, iamproxy.Options{Target: ddblocal.Endpoint(t), Principal: p, HashKeys: tn.hashKeys})
}

// open opens namespace ns through the proxy.
func (tn *tenants) open(t *testing.T, p *iamproxy.Proxy, ns string, opts ...func(*limiter.Options)) (*limiter.RateLimiter, error) {
	t.Helper()
	rl, _, err := tn.openRepo(t, p, ns, opts...)
	return rl, err
}

// openRepo is open, which also returns the limiter's store.
func (tn *tenants) openRepo(t *testing.T, p *iamproxy.Proxy, ns string, opts ...func(*limiter.Options)) (*limiter.RateLimiter, *limiter.DynamoDBRepository, error) {
	t.Helper()
	repo, err := limiter.OpenDynamoDB(testContext(t), ddblocal.NewClient(p.URL), func(o *limiter.DynamoDBOptions) {
		o.Table, o.Namespace = tn.table, ns
	})
	if err != nil {
		return nil, nil, err
	}
	return limiter.New(repo, opts...), repo, nil
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a safety net: DynamoDB Local is slow on a loaded machine
	t.Cleanup(cancel)
	return ctx
}

// requireNoDenials fails t with the refused requests, if any.
func requireNoDenials(t *testing.T, p *iamproxy.Proxy) {
	t.Helper()
	var lines []string
	for _, d := range p.Denials() {
		lines = append(lines, fmt.Sprintf("%s: %s on %s keys %v", d.Operation, d.Request.Action, d.Request.Resource, d.Request.LeadingKeys))
	}
	require.Empty(t, lines, "requests refused by the policy")
}

// assertDenied checks that err is DynamoDB's AccessDeniedException, reachable
// with errors.As, and that the proxy refused something.
func assertDenied(t *testing.T, p *iamproxy.Proxy, what string, err error) {
	t.Helper()
	if !assert.Error(t, err, "%s: want an error", what) {
		return
	}
	var api smithy.APIError
	if assert.ErrorAs(t, err, &api, "%s: %v is not a DynamoDB API error", what, err) {
		assert.Equal(t, "AccessDeniedException", api.ErrorCode(), "%s: %v", what, err)
	}
	assert.NotEmpty(t, p.Denials(), "%s: the proxy refused nothing", what)
	p.Reset()
}

func TestAcquirePolicyTenantWorkload(t *testing.T) {
	tn := setUpTenants(t)
	for _, speculative := range []bool{true, false} {
		for _, group := range []bool{true, false} {
			for _, entity := range []string{"key-1", "solo"} { // cascade to org, and none
				name := fmt.Sprintf("speculative=%v/group=%v/%s", speculative, group, entity)
				t.Run(name, func(t *testing.T) {
					ctx := testContext(t)
					p := tn.proxy(t, tn.idA, "NamespaceAcquirePolicy")
					rl, err := tn.open(t, p, nsA, func(o *limiter.Options) { o.SpeculativeWrites = speculative }, func(o *limiter.Options) { o.GroupCommit = group })
					require.NoError(t, err)
					defer rl.Close()
					tenantWorkload(ctx, t, rl, entity)
					requireNoDenials(t, p)
					if st := rl.Stats().Speculative; speculative {
						assert.Greater(t, st.Attempts, st.Fallbacks(), "no acquire took the speculative path")
					} else {
						assert.Zero(t, st.Attempts, "an acquire took the speculative path")
					}
					assert.Positive(t, p.Allowed("UpdateItem")+p.Allowed("TransactWriteItems")+p.Allowed("PutItem"), "no write went through")
				})
			}
		}
	}
}

// tenantWorkload runs everything an acquire-only service does.
func tenantWorkload(ctx context.Context, t *testing.T, rl *limiter.RateLimiter, entity string) {
	t.Helper()
	for range 3 { // the first may create the bucket; the later ones update it
		l, err := rl.Acquire(ctx, entity, res, limiter.Consume{"rpm": 1, "tpm": 100})
		require.NoError(t, err)
		require.NoError(t, l.Adjust(limiter.Consume{"tpm": 50}))
		require.NoError(t, l.Commit(ctx))
	}
	l, err := rl.Acquire(ctx, entity, res, limiter.Consume{"rpm": 1})
	require.NoError(t, err)
	require.NoError(t, l.Rollback(ctx))

	l, err = rl.Wait(ctx, entity, res, limiter.Consume{"rpm": 1})
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx))

	l, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{
		{EntityID: entity, Resource: res, Consume: limiter.Consume{"rpm": 1}},
		{EntityID: entity, Resource: "embed", Consume: limiter.Consume{"rpm": 1}},
	})
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx))

	_, err = rl.Available(ctx, entity, res)
	require.NoError(t, err)
	require.NoError(t, rl.Reset(ctx, entity, res))
	_, err = iterx.Collect(rl.Admin().AuditEvents(ctx, entity))
	require.NoError(t, err)
	_, err = iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{EntityID: entity, Resource: res}))
	require.NoError(t, err)
	_, err = iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{Resource: res}))
	require.NoError(t, err)
	_, err = rl.Admin().UsageSummary(ctx, limiter.UsageQuery{EntityID: entity, Resource: res})
	require.NoError(t, err)
	_, err = rl.Admin().Entity(ctx, entity)
	require.NoError(t, err)
	_, _, err = rl.Admin().ResolveLimits(ctx, entity, res)
	require.NoError(t, err)
}

func TestFullAccessPolicyAdministration(t *testing.T) {
	tn := setUpTenants(t)
	ctx := testContext(t)
	p := tn.proxy(t, tn.idA, "NamespaceFullAccessPolicy")
	rl, err := tn.open(t, p, nsA)
	require.NoError(t, err)
	defer rl.Close()

	limits := []limiter.Limit{limiter.PerMinute("rpm", 60), limiter.PerMinute("tpm", 6000)}
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "team", Name: "Team"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "team-key", ParentID: "team", Cascade: true})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "team-key", Resource: res}, limits))
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: "team-key", Resource: res})
	require.NoError(t, err)
	assert.Len(t, got, 2)
	children, err := iterx.Collect(rl.Admin().Children(ctx, "team"))
	require.NoError(t, err)
	assert.Len(t, children, 1)
	ids, err := iterx.Collect(rl.Admin().EntitiesWithLimits(ctx, res))
	require.NoError(t, err)
	assert.Contains(t, ids, "team-key")
	_, err = iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "embed"}, limits))
	_, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: "embed"})
	require.NoError(t, err)
	_, err = iterx.Collect(rl.Admin().ResourcesWithDefaults(ctx))
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetSystemDefaults(ctx, limits, limiter.OnUnavailableBlock))
	_, _, err = rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	l, err := rl.Acquire(ctx, "team-key", res, limiter.Consume{"rpm": 1})
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx))
	_, err = rl.Admin().ResourceCapacity(ctx, res, "rpm", false)
	require.NoError(t, err)
	require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "team-key", Resource: res}))
	require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Resource: "embed"}))
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "team-key"))
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "team"))
	requireNoDenials(t, p)
}

func TestReadOnlyPolicyMonitoring(t *testing.T) {
	tn := setUpTenants(t)
	ctx := testContext(t)
	p := tn.proxy(t, tn.idA, "NamespaceReadOnlyPolicy")
	rl, err := tn.open(t, p, nsA)
	require.NoError(t, err)
	defer rl.Close()
	_, err = rl.Admin().Entity(ctx, "key-1")
	require.NoError(t, err)
	_, err = rl.Available(ctx, "key-1", res)
	require.NoError(t, err)
	_, err = iterx.Collect(rl.Admin().AuditEvents(ctx, "key-1"))
	require.NoError(t, err)
	_, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: res})
	require.NoError(t, err)
	requireNoDenials(t, p)

	_, err = rl.Acquire(ctx, "key-1", res, limiter.Consume{"rpm": 1})
	assertDenied(t, p, "read-only Acquire", err)
	assertDenied(t, p, "read-only SetLimits", rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key-1", Resource: res}, []limiter.Limit{limiter.PerMinute("rpm", 1)}))
}

// TestOtherTenantRefused opens namespace B with A's principal: the
// registry (shared, readable) resolves B, and then every call on B's items
// is refused, under the acquire and the full-access policy alike, whatever
// the on-unavailable mode.
func TestOtherTenantRefused(t *testing.T) {
	tn := setUpTenants(t)
	for _, policy := range []string{"NamespaceAcquirePolicy", "NamespaceFullAccessPolicy"} {
		for _, speculative := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/speculative=%v", policy, speculative), func(t *testing.T) {
				ctx := testContext(t)
				p := tn.proxy(t, tn.idA, policy)
				rl, err := tn.open(t, p, nsB, func(o *limiter.Options) { o.SpeculativeWrites = speculative })
				require.NoError(t, err, "the registry is shared: opening B resolves it")
				defer rl.Close()
				p.Reset()
				otherTenantCalls(ctx, t, p, rl)
			})
		}
	}
}

func otherTenantCalls(ctx context.Context, t *testing.T, p *iamproxy.Proxy, rl *limiter.RateLimiter) {
	t.Helper()
	one := limiter.Consume{"rpm": 1}
	for _, mode := range []limiter.OnUnavailable{limiter.OnUnavailableBlock, limiter.OnUnavailableAllow} {
		for _, entity := range []string{"key-1", "solo"} {
			l, err := rl.Acquire(ctx, entity, res, one, limiter.WithOnUnavailable(mode))
			assert.Nil(t, l, "Acquire(%s, %s) admitted", entity, mode)
			assertDenied(t, p, "Acquire "+entity+" "+string(mode), err)
			// With limits given, no config read is needed: the bucket
			// write itself is refused.
			l, err = rl.Acquire(ctx, entity, res, one, limiter.WithOnUnavailable(mode),
				limiter.WithLimits(limiter.PerMinute("rpm", 100)))
			assert.Nil(t, l, "Acquire(%s, %s, limits) admitted", entity, mode)
			assertDenied(t, p, "Acquire with limits "+entity+" "+string(mode), err)
		}
		l, _, err := rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "solo", Resource: res, Consume: one},
			{EntityID: "key-1", Resource: res, Consume: one},
		}, limiter.WithOnUnavailable(mode))
		assert.Nil(t, l, "AcquireAll admitted (%s)", mode)
		assertDenied(t, p, "AcquireAll "+string(mode), err)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err = rl.Wait(wctx, "solo", res, one, limiter.WithOnUnavailable(mode))
		cancel()
		assert.Nil(t, l, "Wait admitted (%s)", mode)
		assertDenied(t, p, "Wait "+string(mode), err)
	}
	assertDenied(t, p, "Reset", rl.Reset(ctx, "solo", res))
	_, err := rl.Available(ctx, "solo", res)
	assertDenied(t, p, "Available", err)
	_, err = rl.Admin().Entity(ctx, "solo")
	assertDenied(t, p, "GetEntity", err)
	_, err = iterx.Collect(rl.Admin().AuditEvents(ctx, "solo"))
	assertDenied(t, p, "AuditEvents", err)
	_, err = iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{EntityID: "solo"}))
	assertDenied(t, p, "UsageSnapshots by entity", err)
	_, err = iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{Resource: res}))
	assertDenied(t, p, "UsageSnapshots by resource (GSI2)", err)
	_, err = rl.Admin().UsageSummary(ctx, limiter.UsageQuery{EntityID: "solo", Resource: res})
	assertDenied(t, p, "UsageSummary", err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "intruder"})
	assertDenied(t, p, "CreateEntity", err)
	assertDenied(t, p, "SetLimits", rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "solo", Resource: res}, []limiter.Limit{limiter.PerMinute("rpm", 1_000_000)}))
	assertDenied(t, p, "SetResourceDefaults", rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{limiter.PerMinute("rpm", 1_000_000)}))
	assertDenied(t, p, "SetSystemDefaults", rl.Admin().SetSystemDefaults(ctx, nil, limiter.OnUnavailableAllow))
	assertDenied(t, p, "DeleteEntity", rl.Admin().DeleteEntity(ctx, "solo"))
	_, err = iterx.Collect(rl.Admin().Children(ctx, "org"))
	assertDenied(t, p, "Children (GSI1)", err)
	_, err = iterx.Collect(rl.Admin().EntitiesWithLimits(ctx, res))
	assertDenied(t, p, "EntitiesWithLimits (GSI3)", err)
	_, err = rl.Admin().ResourceCapacity(ctx, res, "rpm", false)
	assertDenied(t, p, "ResourceCapacity (GSI2)", err)
}

// TestRawRequestsOnOtherTenant sends DynamoDB requests by hand: a
// transaction or batch that mixes A's and B's items is refused whole, as is
// a query of B's partition on an index, and a write of the shared
// registry.
func TestRawRequestsOnOtherTenant(t *testing.T) {
	tn := setUpTenants(t)
	ctx := testContext(t)
	p := tn.proxy(t, tn.idA, "NamespaceFullAccessPolicy")
	c := ddblocal.NewClient(p.URL)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	key := func(pk, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"PK": s(pk), "SK": s(sk)}
	}
	table := aws.String(tn.table)
	metaA, metaB := key(tn.idA+"/ENTITY#solo", "#META"), key(tn.idB+"/ENTITY#solo", "#META")

	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: metaA})
	require.NoError(t, err)
	_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: metaB})
	assertDenied(t, p, "GetItem B", err)
	_, err = c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		tn.table: {Keys: []map[string]types.AttributeValue{metaA, metaB}},
	}})
	assertDenied(t, p, "BatchGetItem A+B", err)
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: table, Key: metaA, UpdateExpression: aws.String("SET x = :x"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":x": s("1")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: table, Key: metaB, ConditionExpression: aws.String("attribute_exists(PK)")}},
	}})
	assertDenied(t, p, "TransactWriteItems A+B", err)
	_, err = c.Query(ctx, &dynamodb.QueryInput{TableName: table, IndexName: aws.String("GSI1"),
		KeyConditionExpression:    aws.String("GSI1PK = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(tn.idB + "/PARENT#org")}})
	assertDenied(t, p, "Query GSI1 B", err)
	_, err = c.Query(ctx, &dynamodb.QueryInput{TableName: table, IndexName: aws.String("GSI4"),
		KeyConditionExpression:    aws.String("GSI4PK = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(tn.idB)}})
	assertDenied(t, p, "Query GSI4 B's namespace", err)
	_, err = c.Scan(ctx, &dynamodb.ScanInput{TableName: table})
	assertDenied(t, p, "Scan", err)
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key(tn.idB+"/ENTITY#x", "#META")})
	assertDenied(t, p, "PutItem B", err)
	_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: metaB})
	assertDenied(t, p, "DeleteItem B", err)
	_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("other-table"), Key: metaA})
	assertDenied(t, p, "GetItem on another table", err)
	_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key(tn.idA+"x/ENTITY#solo", "#META")})
	assertDenied(t, p, "GetItem of a namespace whose id starts with A's", err)
	requireNoDenials(t, p)

	// The acquire policy may read the shared items but not write them.
	pa := tn.proxy(t, tn.idA, "NamespaceAcquirePolicy")
	ca := ddblocal.NewClient(pa.URL)
	_, err = ca.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key("_/SYSTEM#", "#VERSION")})
	require.NoError(t, err)
	_, err = ca.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key("_/SYSTEM#", "#VERSION"),
		UpdateExpression: aws.String("SET lambda_version = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("9.9.9")}})
	assertDenied(t, pa, "UpdateItem of the version record", err)
}
