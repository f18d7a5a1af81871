package ddbschema

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// aggBucket is shard 0 of a bucket with two shards as the aggregator reads
// it from a stream image: wcu nearly spent, a limit whose name needs a
// placeholder, and a capacity that does not divide by the shard count.
func aggBucket() Bucket {
	b, err := BucketFromItem(BucketItem(Bucket{
		Namespace: "ns1", EntityID: "e", Resource: "openai/gpt-4", ShardCount: 2, RefillMs: 1700000000123,
		Cascade: true, ParentID: "p", TTL: 99,
		Limits: []BucketLimit{
			{Name: "tpm-x", TokensMilli: -5000, CapacityMilli: 10_000_001, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000, TotalConsumedMilli: 15_000},
			{Name: "rpm", TokensMilli: 1, CapacityMilli: 2, RefillAmountMilli: 3, RefillPeriodMs: 4000},
			{Name: WCULimitName, TokensMilli: 5000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000, TotalConsumedMilli: 995000},
		},
	}))
	if err != nil {
		panic(err)
	}
	return b
}

// TestBucketUpdatesGolden pins the aggregator's requests on bucket items,
// expressions and placeholders included.
func TestBucketUpdatesGolden(t *testing.T) {
	t.Parallel()
	b := aggBucket()
	credits := map[string]int64{"tpm-x": 5, "rpm": 0, WCULimitName: 7, "z": -1}
	noWCU := b
	noWCU.Limits = noWCU.Limits[:2]
	unsharded := b
	unsharded.ShardCount = 0
	got := map[string]*request{
		"refill":                   updateRequest(RefillUpdate("tbl", b, credits, 1700000001000)),
		"refill, nothing positive": updateRequest(RefillUpdate("tbl", b, map[string]int64{"a": 0, "b": -3}, 1)),
		"shard doubling":           updateRequest(ShardDoublingUpdate("tbl", b, credits, 1700000001000)),
		"shard doubling, no wcu":   updateRequest(ShardDoublingUpdate("tbl", noWCU, nil, 1700000001000)),
		"shard count propagation":  updateRequest(ShardCountPropagation("tbl", b, 1)),
		"new shard 3":              putRequest(NewShardItem("tbl", b, 3)),
		"new shard of count 0":     putRequest(NewShardItem("tbl", unsharded, 1)),
	}
	assert.Nil(t, got["refill, nothing positive"], "RefillUpdate without a positive credit is not nil")
	checkGolden(t, "bucket_updates.golden.json", got)

	for name, want := range map[string]string{
		"refill":                  "SET rf = 1700000001000 ADD b_tpm-x_tk 5, b_tpm-x_ts 5, b_wcu_tk 7 IF rf = 1700000000123",
		"shard doubling":          "SET shard_count = 4, rf = 1700000001000, b_wcu_tk = 1000000 ADD b_tpm-x_tk 5, b_tpm-x_ts 5 IF shard_count = 2 AND rf = 1700000000123",
		"shard doubling, no wcu":  "SET shard_count = 4, rf = 1700000001000 IF shard_count = 2 AND rf = 1700000000123",
		"shard count propagation": "SET shard_count = 2 IF shard_count < 2",
		"new shard 3":             "PUT IF attribute_not_exists(PK)",
	} {
		assert.Equal(t, want, got[name].Rendered, "%s\n got %s\nwant %s", name, got[name].Rendered, want)
	}
	// The new shard: full wcu, its share of every other capacity, no
	// consumption, everything else as on shard 0.
	ns := got["new shard 3"].Item
	for attr, want := range map[string]string{
		"PK": `S:"ns1/BUCKET#e#openai/gpt-4#3"`, "GSI2SK": `S:"BUCKET#e#3"`, "shard_count": "N:2", "rf": "N:1700000000123",
		"ttl": "N:99", "cascade": "BOOL:true", "parent_id": `S:"p"`,
		"b_wcu_tk": "N:1000000", "b_wcu_tc": "N:0", "b_tpm-x_tk": "N:5000000", "b_tpm-x_cp": "N:10000001", "b_tpm-x_tc": "N:0",
		"b_rpm_tk": "N:1", "b_rpm_ra": "N:3",
		// The exact state of the speculative write, from the new shard's
		// balances: tpm-x, 5,000,000 of 10,000,001 at 10,000,000 a minute
		// (30,000.006 ms: 30,001); rpm, 1 of 2 at 3 per 4 s (1,333.3 ms).
		"b_tpm-x_ts": "N:5000000", "b_tpm-x_fa": "N:1700000030124", "b_tpm-x_fp": "N:10000001000000100000000000060000",
		"b_rpm_ts": "N:1", "b_rpm_fa": "N:1700000001457",
	} {
		assert.Equal(t, want, ns[attr], "new shard %s = %s, want %s", attr, ns[attr], want)
	}
	zero := got["new shard of count 0"].Item
	assert.Equal(t, "N:1", zero["shard_count"], "new shard of a count-0 item: shard_count")
	assert.Equal(t, "N:10000001", zero["b_tpm-x_tk"], "new shard of a count-0 item: b_tpm-x_tk")
}
