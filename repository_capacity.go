package limiter

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/internal/bucketmath"
	"github.com/zaelimiter/limiter/store"
)

// entityShards accumulates the shards of one entity's bucket.
type entityShards struct {
	capacity  int64 // whole tokens, from the lowest shard seen
	lowShard  int
	available int64 // whole tokens, summed over shards
}

// ResourceCapacity implements [store.CapacityReader]. The buckets are found with
// a GSI2 query (every page; the index projects whole items). The shards of
// an entity count once: its capacity is the shard-0 capacity (each shard
// stores the full one) and its available tokens are the sum of every
// shard's balance refilled to now, capped at the capacity. Available is
// negative for a bucket in debt, which puts utilisation above 100 %.
// UtilizationPct is (capacity − available) / capacity × 100, and 0 when
// the capacity is 0. Entities are sorted by id.
//
// With parentsOnly, only entities whose META record has no parent are kept
// (entities without META are dropped, as in the original); their META
// records are read with one BatchGetItem rather than one GetItem per bucket.
func (r *DynamoDBRepository) ResourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool, now time.Time) (ResourceCapacity, error) {
	op := "resource capacity " + resource + "/" + limitName
	items, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(r.opts.Table),
		IndexName:              aws.String(indexGSI2),
		KeyConditionExpression: aws.String("GSI2PK = :pk AND begins_with(GSI2SK, :sk_prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": schemaS(gsi2PKResource(r.nsID, resource)), ":sk_prefix": schemaS(prefixBucket),
		},
	})
	if err != nil {
		return ResourceCapacity{}, wrapErr(op, err)
	}
	nowMs := now.UnixMilli()
	byEntity := make(map[string]*entityShards)
	for _, item := range items {
		b, err := bucketFromDynamoDB(item)
		if err != nil {
			return ResourceCapacity{}, wrapErr(op, err)
		}
		s, ok := b.State(limitName)
		if !ok {
			continue
		}
		avail := calculateAvailable(s, nowMs)
		e, seen := byEntity[b.Key.EntityID]
		if !seen {
			byEntity[b.Key.EntityID] = &entityShards{capacity: s.Capacity(), lowShard: b.Key.Shard, available: avail}
			continue
		}
		if b.Key.Shard < e.lowShard {
			e.capacity, e.lowShard = s.Capacity(), b.Key.Shard
		}
		e.available = bucketmath.AddSat(e.available, avail)
	}
	if parentsOnly && len(byEntity) > 0 {
		if err := r.keepParents(ctx, byEntity); err != nil {
			return ResourceCapacity{}, wrapErr(op, err)
		}
	}
	ids := make([]string, 0, len(byEntity))
	for id := range byEntity {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := ResourceCapacity{Resource: resource, LimitName: limitName, Entities: make([]store.EntityCapacity, 0, len(ids))}
	for _, id := range ids {
		e := byEntity[id]
		available := min(e.available, e.capacity)
		out.Entities = append(out.Entities, store.EntityCapacity{
			EntityID: id, Capacity: e.capacity, Available: available,
			UtilizationPct: utilizationPct(e.capacity, available),
		})
		out.TotalCapacity = bucketmath.AddSat(out.TotalCapacity, e.capacity)
		out.TotalAvailable = bucketmath.AddSat(out.TotalAvailable, available)
	}
	out.UtilizationPct = utilizationPct(out.TotalCapacity, out.TotalAvailable)
	return out, nil
}

// keepParents removes from byEntity the entities whose META record has a
// parent or does not exist, reading every META record in one BatchGetItem
// (chunks of 100).
func (r *DynamoDBRepository) keepParents(ctx context.Context, byEntity map[string]*entityShards) error {
	keys := make([]map[string]types.AttributeValue, 0, len(byEntity))
	for id := range byEntity {
		keys = append(keys, primaryKey(pkEntity(r.nsID, id), skMeta))
	}
	metas, err := r.batchGet(ctx, keys, false)
	if err != nil {
		return err
	}
	parents := make(map[string]bool, len(metas))
	prefix := pkEntity(r.nsID, "")
	for _, item := range metas {
		pk, _ := schemaGetS(item, attrPK)
		if entityFromItem(item).IsParent() {
			parents[strings.TrimPrefix(pk, prefix)] = true
		}
	}
	for id := range byEntity {
		if !parents[id] {
			delete(byEntity, id)
		}
	}
	return nil
}

// utilizationPct returns (capacity − available) / capacity × 100, or 0 when
// capacity is not positive.
func utilizationPct(capacity, available int64) float64 {
	if capacity <= 0 {
		return 0
	}
	return (float64(capacity) - float64(available)) / float64(capacity) * 100
}
