package iamproxy_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/iamproxy"
	"github.com/zaelimiter/limiter/internal/iterx"
)

// namespacePolicies returns the template's managed policies that confine a
// principal with dynamodb:LeadingKeys: every namespace-scoped policy,
// whatever it is called.
func namespacePolicies(t *testing.T, tpl *iamproxy.Template) []string {
	t.Helper()
	var out []string
	for _, name := range tpl.ManagedPolicies() {
		pol, err := tpl.Policy(name)
		require.NoError(t, err)
		if slices.ContainsFunc(pol.Statements, func(s iamproxy.Statement) bool {
			for _, keys := range s.Conditions {
				if _, ok := keys["dynamodb:LeadingKeys"]; ok {
					return true
				}
			}
			return false
		}) {
			out = append(out, name)
		}
	}
	return out
}

// grantedActions returns every action a policy's Allow statements name.
func grantedActions(pol iamproxy.Policy) []string {
	var out []string
	for _, s := range pol.Statements {
		if s.Effect == "Allow" {
			out = append(out, s.Actions...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readActions are the actions that change nothing.
var readActions = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan",
	"dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": s(pk), "SK": s(sk)}
}

// sharedItems reads every item under the shared prefix "_/", table-wide.
func (tn *tenants) sharedItems(ctx context.Context, t *testing.T) []map[string]types.AttributeValue {
	t.Helper()
	out, err := ddblocal.Client(t).Scan(ctx, &dynamodb.ScanInput{
		TableName: aws.String(tn.table), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(PK, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("_/")},
	})
	require.NoError(t, err)
	items := out.Items
	slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int {
		return strings.Compare(a["PK"].(*types.AttributeValueMemberS).Value+a["SK"].(*types.AttributeValueMemberS).Value,
			b["PK"].(*types.AttributeValueMemberS).Value+b["SK"].(*types.AttributeValueMemberS).Value)
	})
	return items
}

// sharedWrite is one attempt to change the shared items.
type sharedWrite struct {
	name    string
	actions []string // the IAM actions it exercises
	do      func(ctx context.Context, c *dynamodb.Client) error
}

// sharedWrites are the attempts of a principal of namespace idA on the
// shared items: re-point tenant-b's registry record at idA, change the
// version record, create or delete shared items, alone, in a batch and in a
// transaction, and mixed with an item of its own namespace.
func (tn *tenants) sharedWrites() []sharedWrite {
	table := aws.String(tn.table)
	regB := key("_/SYSTEM#", "#NAMESPACE#"+nsB)
	version := key("_/SYSTEM#", "#VERSION")
	ownItem := key(tn.idA+"/ENTITY#solo", "#META")
	hijack := map[string]types.AttributeValue{"PK": s("_/SYSTEM#"), "SK": s("#NAMESPACE#" + nsB),
		"namespace_id": s(tn.idA), "namespace_name": s(nsB), "status": s("active")}
	newShared := key("_/SYSTEM#", "#NAMESPACE#planted")
	setVersion := func(k map[string]types.AttributeValue) *types.Update {
		return &types.Update{TableName: table, Key: k, UpdateExpression: aws.String("SET schema_version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("99.0.0")}}
	}
	transact := func(items ...types.TransactWriteItem) func(ctx context.Context, c *dynamodb.Client) error {
		return func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}
	}
	batch := func(reqs ...types.WriteRequest) func(ctx context.Context, c *dynamodb.Client) error {
		return func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tn.table: reqs}})
			return err
		}
	}
	return []sharedWrite{
		{"PutItem re-pointing tenant-b's registry record", []string{"dynamodb:PutItem"}, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: hijack})
			return err
		}},
		{"PutItem of a new shared item", []string{"dynamodb:PutItem"}, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: newShared})
			return err
		}},
		{"UpdateItem of the version record", []string{"dynamodb:UpdateItem"}, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.UpdateItem(ctx, ddbschema.UpdateInput(setVersion(version)))
			return err
		}},
		{"UpdateItem of tenant-b's registry record", []string{"dynamodb:UpdateItem"}, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: regB,
				UpdateExpression:          aws.String("SET namespace_id = :id"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":id": s(tn.idA)}})
			return err
		}},
		{"DeleteItem of tenant-b's registry record", []string{"dynamodb:DeleteItem"}, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: regB})
			return err
		}},
		{"DeleteItem of the version record", []string{"dynamodb:DeleteItem"}, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: version})
			return err
		}},
		{"BatchWriteItem put", []string{"dynamodb:BatchWriteItem"},
			batch(types.WriteRequest{PutRequest: &types.PutRequest{Item: hijack}})},
		{"BatchWriteItem delete", []string{"dynamodb:BatchWriteItem"},
			batch(types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: version}})},
		{"BatchWriteItem with an item of its own", []string{"dynamodb:BatchWriteItem"},
			batch(types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: ownItem}}, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: regB}})},
		{"TransactWriteItems Put", []string{"dynamodb:PutItem"},
			transact(types.TransactWriteItem{Put: &types.Put{TableName: table, Item: hijack}})},
		{"TransactWriteItems Update", []string{"dynamodb:UpdateItem"},
			transact(types.TransactWriteItem{Update: setVersion(version)})},
		{"TransactWriteItems Delete", []string{"dynamodb:DeleteItem"},
			transact(types.TransactWriteItem{Delete: &types.Delete{TableName: table, Key: regB}})},
		{"TransactWriteItems ConditionCheck", []string{"dynamodb:ConditionCheckItem"},
			transact(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: table, Key: regB,
				ConditionExpression: aws.String("attribute_exists(PK)")}})},
		{"TransactWriteItems with an item of its own", []string{"dynamodb:UpdateItem", "dynamodb:PutItem"},
			transact(types.TransactWriteItem{Update: setVersion(ownItem)}, types.TransactWriteItem{Put: &types.Put{TableName: table, Item: hijack}})},
	}
}

// TestSharedPrefixReadOnly tries, under every namespace-scoped policy of
// the template, every kind of write of the shared items under "_/" — the
// version record and the namespace registry — alone, in batches and in
// transactions: each is refused, the shared items are unchanged, and
// tenant B still opens its namespace. Every write action a policy grants
// must be exercised here, so a new grant cannot slip past. Reads of the
// shared items work under each policy (opening a namespace needs them),
// and the stack's table-wide administration policy still writes them.
func TestSharedPrefixReadOnly(t *testing.T) {
	tn := setUpTenants(t)
	ctx := testContext(t)
	before := tn.sharedItems(ctx, t)
	require.NotEmpty(t, before)
	policies := namespacePolicies(t, tn.tpl)
	require.Equal(t, []string{"NamespaceAcquirePolicy", "NamespaceFullAccessPolicy", "NamespaceReadOnlyPolicy"}, policies)
	writes := tn.sharedWrites()
	exercised := map[string]bool{}
	for _, w := range writes {
		for _, a := range w.actions {
			exercised[a] = true
		}
	}
	for _, name := range policies {
		t.Run(name, func(t *testing.T) {
			pol, err := tn.tpl.Policy(name)
			require.NoError(t, err)
			for _, a := range grantedActions(pol) {
				if !slices.Contains(readActions, a) {
					assert.Contains(t, exercised, a, "%s grants %s: add its writes of the shared items to sharedWrites", name, a)
				}
			}
			p := tn.proxy(t, tn.idA, name)
			c := ddblocal.NewClient(p.URL)
			for _, w := range writes {
				assertDenied(t, p, w.name, w.do(ctx, c))
			}

			_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tn.table), Key: key("_/SYSTEM#", "#VERSION")})
			require.NoError(t, err)
			_, err = c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(tn.table), KeyConditionExpression: aws.String("PK = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("_/SYSTEM#")}})
			require.NoError(t, err)
			_, err = c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				tn.table: {Keys: []map[string]types.AttributeValue{key("_/SYSTEM#", "#NAMESPACE#"+nsA), key("_/SYSTEM#", "#VERSION")}},
			}})
			require.NoError(t, err)
			requireNoDenials(t, p)
		})
	}
	assert.Equal(t, before, tn.sharedItems(ctx, t), "the shared items changed")

	// B's service, tagged with B's id, still opens B and acquires.
	pb := tn.proxy(t, tn.idB, "NamespaceAcquirePolicy")
	rl, err := tn.open(t, pb, nsB)
	require.NoError(t, err)
	defer rl.Close()
	l, err := rl.Acquire(ctx, "solo", res, limiter.Consume{"rpm": 1})
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx))
	requireNoDenials(t, pb)

	// The stack's own administration (the table-wide policy) writes the
	// shared prefix: it registers a namespace.
	pf := tn.proxy(t, tn.idA, "FullAccessPolicy")
	rlc, err := tn.open(t, pf, "tenant-c")
	require.NoError(t, err)
	defer rlc.Close()
	requireNoDenials(t, pf)
	assert.Len(t, tn.sharedItems(ctx, t), len(before)+2, "tenant-c's registry records")
}

// TestPlantedIndexEntriesIgnored: under the acquire policy, tenant A puts,
// in its own partitions, items whose index keys name tenant B's partitions
// — a child of B's "org" (GSI1), a bucket of B's resource and of B's entity
// "solo" (GSI2, GSI3), a usage snapshot of B's resource (GSI2) and a config
// listing an entity with limits on it (GSI3). IAM allows every one of
// these writes: it checks the items' partition keys only. B's children,
// resource capacity, usage and entity listings never show them, and B's
// DeleteEntity("solo") succeeds without touching A's items.
func TestPlantedIndexEntriesIgnored(t *testing.T) {
	tn := setUpTenants(t)
	ctx := testContext(t)
	pa := tn.proxy(t, tn.idA, "NamespaceAcquirePolicy")
	ca := ddblocal.NewClient(pa.URL)
	table := aws.String(tn.table)

	set := func(item map[string]types.AttributeValue, attrs map[string]string) map[string]types.AttributeValue {
		for k, v := range attrs {
			item[k] = s(v)
		}
		return item
	}
	out, err := ca.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key(ddbschema.PKBucket(tn.idA, "solo", res, 0), ddbschema.SKState), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.NotEmpty(t, out.Item, "A's bucket of solo")
	bucket := set(out.Item, map[string]string{
		"PK": ddbschema.PKBucket(tn.idA, "planted", res, 0), ddbschema.AttrEntityID: "planted",
		ddbschema.AttrGSI2PK: ddbschema.GSI2PKResource(tn.idB, res), ddbschema.AttrGSI2SK: ddbschema.GSI2SKBucket("planted", 0),
		ddbschema.AttrGSI3PK: ddbschema.GSI3PKEntity(tn.idB, "solo"), ddbschema.AttrGSI3SK: ddbschema.GSI3SKBucket(res, 0),
	})
	window := time.Now().UTC().Truncate(time.Hour)
	planted := []map[string]types.AttributeValue{
		set(ddbschema.EntityItem(tn.idA, ddbschema.Entity{ID: "planted", ParentID: "org", CreatedAt: window}),
			map[string]string{ddbschema.AttrGSI1PK: ddbschema.GSI1PKParent(tn.idB, "org")}),
		bucket,
		set(ddbschema.UsageSnapshotItem(tn.idA, ddbschema.UsageSnapshot{EntityID: "planted", Resource: res, WindowType: "hourly",
			WindowStart: window, Counters: map[string]int64{"rpm": 1_000_000}, TotalEvents: 1}, window.Add(48*time.Hour).Unix()),
			map[string]string{ddbschema.AttrGSI2PK: ddbschema.GSI2PKResource(tn.idB, res)}),
		set(ddbschema.EntityConfigItem(tn.idA, "planted", res, []ddbschema.ConfigLimit{{Name: "rpm", Capacity: 1, RefillAmount: 1, RefillPeriodSeconds: 60}}),
			map[string]string{ddbschema.AttrGSI3PK: ddbschema.GSI3PKEntityConfig(tn.idB, res)}),
	}
	for _, item := range planted {
		_, err := ca.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item})
		require.NoError(t, err, "IAM checks the partition key only")
	}
	requireNoDenials(t, pa)

	pb := tn.proxy(t, tn.idB, "NamespaceFullAccessPolicy")
	rl, repoB, err := tn.openRepo(t, pb, nsB)
	require.NoError(t, err)
	defer rl.Close()

	children, err := iterx.Collect(rl.Admin().Children(ctx, "org"))
	require.NoError(t, err)
	assert.Equal(t, []string{"key-1"}, entityIDs(children))
	capacity, err := rl.Admin().ResourceCapacity(ctx, res, "rpm", false)
	require.NoError(t, err)
	var capIDs []string
	for _, e := range capacity.Entities {
		capIDs = append(capIDs, e.EntityID)
	}
	assert.Equal(t, []string{"key-1", "org", "solo"}, capIDs)
	snaps, err := iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{Resource: res}))
	require.NoError(t, err)
	assert.Empty(t, snaps, "B has no usage snapshots of its own")
	sum, err := rl.Admin().UsageSummary(ctx, limiter.UsageQuery{Resource: res})
	require.NoError(t, err)
	assert.Zero(t, sum.SnapshotCount)
	ids, err := iterx.Collect(rl.Admin().EntitiesWithLimits(ctx, res))
	require.NoError(t, err)
	assert.Empty(t, ids, "B stored no entity limits")
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "solo"))
	requireNoDenials(t, pb)
	assert.EqualValues(t, 6, repoB.Unwrap().(interface{ ForeignIndexItems() int64 }).ForeignIndexItems(), "GSI1 once, GSI2 three times, GSI3 twice")

	_, err = rl.Admin().Entity(ctx, "solo")
	assert.ErrorIs(t, err, limiter.ErrEntityNotFound)
	for _, item := range planted {
		got, err := ddblocal.Client(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: table,
			Key: map[string]types.AttributeValue{"PK": item["PK"], "SK": item["SK"]}, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		assert.NotEmpty(t, got.Item, "A's item %v was deleted", item["PK"])
	}
}

func entityIDs(es []limiter.Entity) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}
