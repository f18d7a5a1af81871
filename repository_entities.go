// Layer 5, the DynamoDB repository: the listing of every entity of the
// namespace.

package limiter

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

var _ store.EntityLister = (*dynamoRepository)(nil)

// ListEntities implements [store.EntityLister]: one Query of GSI4 for the
// index entries filed under the namespace's entity partitions
// (`{ns}/ENTITY#…`: the entity records, their stored limits and usage
// snapshots), keeping the entity records, then one BatchGetItem of those
// records. pageSize is the Query's Limit, the number of index entries read
// (≤ 0: DynamoDB's 1 MB page), so a page holds at most pageSize entities
// and may hold none while a cursor follows. The cursor has the form of
// [store.ConfigLister]'s.
func (r *dynamoRepository) ListEntities(ctx context.Context, pageSize int, cursor string) ([]Entity, string, error) {
	prefix := pkEntity(r.nsID, "")
	in := &dynamodb.QueryInput{
		TableName:              aws.String(r.opts.Table),
		IndexName:              aws.String(indexGSI4),
		KeyConditionExpression: aws.String("GSI4PK = :ns AND begins_with(GSI4SK, :prefix)"),
		FilterExpression:       aws.String("SK = :meta"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ns": schemaS(r.nsID), ":prefix": schemaS(prefix), ":meta": schemaS(skMeta),
		},
	}
	if pageSize > 0 {
		in.Limit = aws.Int32(int32(min(pageSize, 1<<30)))
	}
	if cursor != "" {
		start, err := r.entitiesCursor(cursor, prefix)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = start
	}
	out, err := r.client.Query(ctx, in)
	if err != nil {
		return nil, "", wrapErr("list entities", err)
	}
	items := r.ownIndexItems(ctx, indexGSI4, r.nsID, out.Items)
	keys := make([]map[string]types.AttributeValue, 0, len(items))
	for _, item := range items {
		keys = append(keys, map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]})
	}
	records, err := r.batchGet(ctx, keys, false)
	if err != nil {
		return nil, "", wrapErr("list entities", err)
	}
	byPK := make(map[string]Entity, len(records))
	for _, item := range records {
		pk, _ := schemaGetS(item, attrPK)
		byPK[pk] = entityFromItem(item)
	}
	entities := make([]Entity, 0, len(keys))
	for _, k := range keys {
		// An entity deleted between the Query and the read is left out.
		if e, ok := byPK[k[attrPK].(*types.AttributeValueMemberS).Value]; ok {
			entities = append(entities, e)
		}
	}
	return entities, encodeCursor(out.LastEvaluatedKey), nil
}

// entitiesCursor decodes a cursor of ListEntities: the last evaluated key
// of a GSI4 query of this namespace's entity partitions.
func (r *dynamoRepository) entitiesCursor(cursor, prefix string) (map[string]types.AttributeValue, error) {
	bad := store.NewValidationError(ErrValidation, "cursor", cursor, "not a cursor returned by ListEntities")
	key, err := decodeCursor(cursor)
	var ve *ValidationError
	if errors.As(err, &ve) {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	ns, _ := schemaGetS(key, ddbschema.AttrGSI4PK)
	sk, _ := schemaGetS(key, ddbschema.AttrGSI4SK)
	pk, _ := schemaGetS(key, attrPK)
	if len(key) != 4 || ns != r.nsID || !strings.HasPrefix(sk, prefix) || !strings.HasPrefix(pk, prefix) {
		return nil, bad
	}
	if _, ok := schemaGetS(key, attrSK); !ok {
		return nil, bad
	}
	return key, nil
}
