// Layer 5, the DynamoDB repository: index results checked against the
// namespace.

package limiter

import (
	"context"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// IAM confines a namespace-scoped principal by the partition key of the
// items it writes (dynamodb:LeadingKeys), never by the values of their index
// keys: a principal of namespace A may write, in its own partition, an item
// whose GSI1PK, GSI2PK, GSI3PK or GSI4PK names namespace B, and B's queries
// of that index would find it. So every index query keeps only the entries
// whose base-table partition key (projected into every index) lies in the
// namespace queried; the others are counted (ForeignIndexItems (of the store behind [DynamoDBRepository]),
// [IndexMetrics]), logged once, and never read, listed, counted or deleted.

// ownIndexItems returns the items of a query on index whose partition key
// starts with nsID + "/", reusing items' array. The items dropped are
// reported.
func (r *dynamoRepository) ownIndexItems(ctx context.Context, index, nsID string, items []map[string]types.AttributeValue) []map[string]types.AttributeValue {
	prefix := nsID + "/"
	kept := items[:0]
	var dropped int64
	var first string
	for _, item := range items {
		pk, _ := schemaGetS(item, attrPK)
		if strings.HasPrefix(pk, prefix) {
			kept = append(kept, item)
			continue
		}
		if dropped == 0 {
			first = pk
		}
		dropped++
	}
	clear(items[len(kept):])
	if dropped > 0 {
		r.foreignIndexItems(ctx, index, nsID, first, dropped)
	}
	return kept
}

// foreignIndexItems reports n dropped entries of index, the first with
// partition key pk: counted, reported to the metrics, and logged the first
// time for the repository and its siblings.
func (r *dynamoRepository) foreignIndexItems(ctx context.Context, index, nsID, pk string, n int64) {
	s := r.shared
	s.foreign.Add(n)
	if s.metrics != nil {
		s.metrics.ForeignIndexItems(ctx, index, n)
	}
	if !s.foreignLogged.CompareAndSwap(false, true) {
		return
	}
	log := s.log
	if log == nil {
		log = slog.Default()
	}
	log.LogAttrs(ctx, slog.LevelWarn, "limiter: index entries of another namespace ignored",
		slog.String("table", r.opts.Table), slog.String("index", index),
		slog.String("namespace_id", nsID), slog.String("item_pk", pk), slog.Int64("count", n))
}

// ForeignIndexItems returns how many index entries the queries of this
// repository and of the repositories sharing its namespace cache
// ([DynamoDBRepository.Namespace]) dropped because their item lies in
// another namespace. Any non-zero count means a principal wrote an item
// whose index keys name a namespace that is not its own: IAM lets a
// namespace-scoped principal do so (it checks only the partition key), and
// the library ignores such entries. The first is logged
// ([DynamoDBOptions].Logger); every one is reported to
// [DynamoDBOptions].Metrics.
func (r *dynamoRepository) ForeignIndexItems() int64 { return r.shared.foreign.Load() }

// queryIndexAll runs a query of one of the namespace's indexes through
// every page and keeps the namespace's own items.
func (r *dynamoRepository) queryIndexAll(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	items, err := r.queryAll(ctx, in)
	if err != nil {
		return nil, err
	}
	return r.ownIndexItems(ctx, *in.IndexName, r.nsID, items), nil
}
