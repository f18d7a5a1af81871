// Layer 5, the DynamoDB repository: entities and stored limit configs, with
// their registries.

package limiter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// configItemKey returns the primary key of a stored config.
func (r *dynamoRepository) configItemKey(k store.ConfigKey) map[string]types.AttributeValue {
	switch k.Level {
	case store.LevelEntity:
		return primaryKey(pkEntity(r.nsID, k.EntityID), skConfig(k.Resource))
	case store.LevelResource:
		return primaryKey(pkResource(r.nsID, k.Resource), skConfig(""))
	default:
		return primaryKey(pkSystem(r.nsID), skConfig(""))
	}
}

// attrLimitSwitches is the attribute of a config item that holds its
// switches (store.EncodeLimitSwitches), absent when there are none. The
// Python original reads a config's limits from its l_{L}_* attributes and
// ignores it.
const attrLimitSwitches = "limit_switches"

// configItem returns the item that stores c under k.
func (r *dynamoRepository) configItem(k store.ConfigKey, c store.Config) (map[string]types.AttributeValue, error) {
	var item map[string]types.AttributeValue
	switch k.Level {
	case store.LevelEntity:
		item = entityConfigItem(r.nsID, k.EntityID, k.Resource, c.Limits)
	case store.LevelResource:
		item = resourceConfigItem(r.nsID, k.Resource, c.Limits)
	default:
		item = systemConfigItem(r.nsID, c.Limits, c.OnUnavailable)
	}
	sw, err := store.EncodeLimitSwitches(c.Switches)
	if err != nil {
		return nil, err
	}
	if sw != "" {
		item[attrLimitSwitches] = &types.AttributeValueMemberS{Value: sw}
	}
	return item, nil
}

// configFromItem decodes a stored config (the on-unavailable mode only at
// the system level). A corrupt config is an infrastructure problem for the
// caller (the on-unavailable mode applies), not invalid input.
func configFromItem(k store.ConfigKey, item map[string]types.AttributeValue) (store.Config, error) {
	limits, err := limitsFromItem(item)
	if err != nil {
		pk, _ := schemaGetS(item, attrPK)
		sk, _ := schemaGetS(item, attrSK)
		return store.Config{}, fmt.Errorf("read config %s %s: %v", pk, sk, err)
	}
	c := store.Config{Limits: limits}
	if raw, ok := schemaGetS(item, attrLimitSwitches); ok {
		if c.Switches, err = store.DecodeLimitSwitches(raw); err != nil {
			pk, _ := schemaGetS(item, attrPK)
			sk, _ := schemaGetS(item, attrSK)
			return store.Config{}, fmt.Errorf("read config %s %s: %v", pk, sk, err)
		}
	}
	if k.Level == store.LevelSystem {
		c.OnUnavailable = onUnavailableFromItem(item)
	}
	return c, nil
}

// LoadConfigs implements [Repository]: one BatchGetItem (eventually
// consistent) for all keys.
func (r *dynamoRepository) LoadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	req := make([]map[string]types.AttributeValue, len(keys))
	byID := make(map[[2]string]store.ConfigKey, len(keys))
	for i, k := range keys {
		req[i] = r.configItemKey(k)
		byID[[2]string{req[i][attrPK].(*types.AttributeValueMemberS).Value, req[i][attrSK].(*types.AttributeValueMemberS).Value}] = k
	}
	items, err := r.batchGet(ctx, req, false)
	if err != nil {
		return nil, wrapErr("read configs", err)
	}
	out := make(map[store.ConfigKey]store.Config, len(items))
	for _, item := range items {
		pk, _ := schemaGetS(item, attrPK)
		sk, _ := schemaGetS(item, attrSK)
		k, ok := byID[[2]string{pk, sk}]
		if !ok {
			continue
		}
		c, err := configFromItem(k, item)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

// GetConfig implements [Repository]: one GetItem (eventually consistent).
func (r *dynamoRepository) GetConfig(ctx context.Context, key store.ConfigKey) (store.Config, bool, error) {
	item, err := r.getConfigItem(ctx, r.configItemKey(key))
	if err != nil || len(item) == 0 {
		return store.Config{}, false, err
	}
	c, err := configFromItem(key, item)
	return c, err == nil, err
}

func (r *dynamoRepository) getConfigItem(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.opts.Table), Key: key, ConsistentRead: aws.Bool(false)})
	if err != nil {
		return nil, wrapErr("get config", err)
	}
	return out.Item, nil
}

// PutConfig implements [Repository]. An entity config is put together with
// an increment of its resource's counter in the entity-config registry (one
// TransactWriteItems, conditioned on the config being new; a replaced
// config is put alone). A resource config is put and its resource added to
// the resource registry (PutItem, UpdateItem). A system config is one
// PutItem.
func (r *dynamoRepository) PutConfig(ctx context.Context, key store.ConfigKey, c store.Config) error {
	item, err := r.configItem(key, c)
	if err != nil {
		return err
	}
	switch key.Level {
	case store.LevelEntity:
		_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(r.opts.Table), Item: item, ConditionExpression: aws.String("attribute_not_exists(PK)")}},
			{Update: r.registryCountUpdate(key.Resource, 1)},
		}})
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			// The config existed (and is counted): replace it.
			_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item})
		}
		return wrapErr("set limits "+key.EntityID+"/"+key.Resource, err)
	case store.LevelResource:
		if _, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item}); err != nil {
			return wrapErr("set resource defaults "+key.Resource, err)
		}
		return r.updateResourceRegistry(ctx, "ADD", key.Resource)
	default:
		_, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item})
		return wrapErr("set system defaults", err)
	}
}

// SetConfigSwitches implements [store.ConfigSwitchWriter]: one
// UpdateItem of the config's switch attribute alone, conditioned on the
// item existing with the records prev (their stored form, the attribute
// absent when there are none). Every other attribute of the item (those
// of the Python library or of another tool included) stays as it is.
func (r *dynamoRepository) SetConfigSwitches(ctx context.Context, key store.ConfigKey, prev, next []store.LimitSwitch) (bool, error) {
	was, err := store.EncodeLimitSwitches(prev)
	if err != nil {
		return false, err
	}
	now, err := store.EncodeLimitSwitches(next)
	if err != nil {
		return false, err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.opts.Table),
		Key:                       r.configItemKey(key),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sw": attrLimitSwitches},
		ExpressionAttributeValues: map[string]types.AttributeValue{},
	}
	if was == "" {
		in.ConditionExpression = aws.String("attribute_exists(#pk) AND attribute_not_exists(#sw)")
	} else {
		in.ConditionExpression = aws.String("attribute_exists(#pk) AND #sw = :was")
		in.ExpressionAttributeValues[":was"] = &types.AttributeValueMemberS{Value: was}
	}
	if now == "" {
		in.UpdateExpression = aws.String("REMOVE #sw")
	} else {
		in.UpdateExpression = aws.String("SET #sw = :now")
		in.ExpressionAttributeValues[":now"] = &types.AttributeValueMemberS{Value: now}
	}
	if len(in.ExpressionAttributeValues) == 0 {
		in.ExpressionAttributeValues = nil
	}
	_, err = r.client.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, wrapErr("set limit switches", err)
	}
	return true, nil
}

// SetSystemConfig implements [store.SystemConfigWriter]: one UpdateItem
// that sets the attributes of the system config's stored form of next
// (config_version, on_unavailable, the l_{L}_* of each limit, the index
// keys, limit_switches) and removes those of prev's stored form that
// next's lacks: the attributes of the limits next drops, a limit's zone
// gone back to UTC, the mode and the records when next has none. It is
// conditioned on the stored records being prev's (the attribute absent
// when there are none); the item may be missing. Every other attribute of
// the item (those of the Python library or of another tool included)
// stays as it is.
func (r *dynamoRepository) SetSystemConfig(ctx context.Context, prev, next store.Config) (bool, error) {
	key := store.SystemConfig()
	item, err := r.configItem(key, next)
	if err != nil {
		return false, err
	}
	was, err := store.EncodeLimitSwitches(prev.Switches)
	if err != nil {
		return false, err
	}
	old, err := r.configItem(key, prev)
	if err != nil {
		return false, err
	}
	b := newExprBuilder()
	var set, remove []string
	for _, a := range slices.Sorted(maps.Keys(item)) {
		if a == attrPK || a == attrSK {
			continue
		}
		set = append(set, b.name(a)+" = "+b.value(item[a]))
	}
	for _, a := range slices.Sorted(maps.Keys(old)) {
		if _, ok := item[a]; !ok {
			remove = append(remove, b.name(a))
		}
	}
	sw := b.name(attrLimitSwitches)
	cond := "attribute_not_exists(" + sw + ")"
	if was != "" {
		cond = sw + " = " + b.value(&types.AttributeValueMemberS{Value: was})
	}
	u := b.update(r.opts.Table, r.configItemKey(key), updateExpr(set, nil, remove), []string{cond})
	_, err = r.client.UpdateItem(ctx, ddbschema.UpdateInput(u))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, wrapErr("set system defaults", err)
	}
	return true, nil
}

// DeleteConfig implements [Repository]. An entity config is deleted
// together with a decrement of its resource's registry counter (one
// TransactWriteItems, conditioned on the config existing with its registry
// keys; a counter that reaches zero is then removed). A config without
// them — written by a client that keeps no registry count, such as a
// limits provisioner — is deleted alone, with one more call, and counts
// nothing down. A resource config is deleted and its
// resource removed from the resource registry. Only for an entity config
// does it know whether one existed.
func (r *dynamoRepository) DeleteConfig(ctx context.Context, key store.ConfigKey) (bool, error) {
	switch key.Level {
	case store.LevelEntity:
		// Only configs written with their registry count (the ones with
		// GSI3 keys) are counted down; a provisioner may write configs
		// without either.
		_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Delete: &types.Delete{
				TableName: aws.String(r.opts.Table), Key: r.configItemKey(key),
				ConditionExpression: aws.String("attribute_exists(PK) AND attribute_exists(GSI3PK)"),
			}},
			{Update: r.registryCountUpdate(key.Resource, -1)},
		}})
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			return r.deleteUncounted(ctx, key)
		}
		if err != nil {
			return false, wrapErr("delete limits "+key.EntityID+"/"+key.Resource, err)
		}
		return true, r.removeZeroRegistryCount(ctx, key.Resource)
	case store.LevelResource:
		if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.opts.Table), Key: r.configItemKey(key)}); err != nil {
			return false, wrapErr("delete resource defaults "+key.Resource, err)
		}
		return true, r.updateResourceRegistry(ctx, "DELETE", key.Resource)
	default:
		if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.opts.Table), Key: r.configItemKey(key)}); err != nil {
			return false, wrapErr("delete system defaults", err)
		}
		return true, nil
	}
}

// deleteUncounted deletes an entity config that has no registry count (or
// none at all): it reports whether one existed.
func (r *dynamoRepository) deleteUncounted(ctx context.Context, key store.ConfigKey) (bool, error) {
	_, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(r.opts.Table), Key: r.configItemKey(key),
		ConditionExpression: aws.String("attribute_exists(PK)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, wrapErr("delete limits "+key.EntityID+"/"+key.Resource, err)
	}
	return true, nil
}

// registryCountUpdate adds delta to the entity-config registry's counter of
// resource.
func (r *dynamoRepository) registryCountUpdate(resource string, delta int64) *types.Update {
	return &types.Update{
		TableName:                aws.String(r.opts.Table),
		Key:                      primaryKey(pkSystem(r.nsID), skEntityConfigResources),
		UpdateExpression:         aws.String("SET GSI4PK = if_not_exists(GSI4PK, :gsi4pk), GSI4SK = if_not_exists(GSI4SK, :gsi4sk) ADD #r :d"),
		ExpressionAttributeNames: map[string]string{"#r": resource},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":gsi4pk": schemaS(r.nsID), ":gsi4sk": schemaS(pkSystem(r.nsID)), ":d": schemaN(delta),
		},
	}
}

// removeZeroRegistryCount drops resource's counter once it is ≤ 0.
func (r *dynamoRepository) removeZeroRegistryCount(ctx context.Context, resource string) error {
	_, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.opts.Table),
		Key:                       primaryKey(pkSystem(r.nsID), skEntityConfigResources),
		UpdateExpression:          aws.String("REMOVE #r"),
		ConditionExpression:       aws.String("#r <= :zero"),
		ExpressionAttributeNames:  map[string]string{"#r": resource},
		ExpressionAttributeValues: map[string]types.AttributeValue{":zero": schemaN(0)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return wrapErr("clean entity config registry", err)
}

// decrementEntityConfigCount takes one from resource's registry counter.
func (r *dynamoRepository) decrementEntityConfigCount(ctx context.Context, resource string) error {
	_, err := r.client.UpdateItem(ctx, ddbschema.UpdateInput(r.registryCountUpdate(resource, -1)))
	if err != nil {
		return wrapErr("update entity config registry", err)
	}
	return r.removeZeroRegistryCount(ctx, resource)
}

// updateResourceRegistry adds (op "ADD") or removes (op "DELETE") resource
// from the registry's string set.
func (r *dynamoRepository) updateResourceRegistry(ctx context.Context, op, resource string) error {
	expr := "SET GSI4PK = if_not_exists(GSI4PK, :gsi4pk), GSI4SK = if_not_exists(GSI4SK, :gsi4sk) ADD resources :r"
	values := map[string]types.AttributeValue{
		":gsi4pk": schemaS(r.nsID), ":gsi4sk": schemaS(pkSystem(r.nsID)),
		":r": &types.AttributeValueMemberSS{Value: []string{resource}},
	}
	if op == "DELETE" {
		expr = "DELETE resources :r"
		delete(values, ":gsi4pk")
		delete(values, ":gsi4sk")
	}
	_, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(r.opts.Table), Key: primaryKey(pkSystem(r.nsID), skResources),
		UpdateExpression: aws.String(expr), ExpressionAttributeValues: values,
	})
	return wrapErr("update resource registry", err)
}

// ListResourcesWithDefaults implements [store.ConfigLister].
func (r *dynamoRepository) ListResourcesWithDefaults(ctx context.Context) ([]string, error) {
	item, err := r.getConfigItem(ctx, primaryKey(pkSystem(r.nsID), skResources))
	if err != nil {
		return nil, err
	}
	return resourceRegistryFromItem(item), nil
}

// ListResourcesWithEntityConfigs implements [store.ConfigLister].
func (r *dynamoRepository) ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	item, err := r.getConfigItem(ctx, primaryKey(pkSystem(r.nsID), skEntityConfigResources))
	if err != nil {
		return nil, err
	}
	return entityConfigRegistryFromItem(item)
}

// ListEntitiesWithCustomLimits implements [store.ConfigLister]: one Query of
// GSI3, keeping the entities of the namespace. pageSize ≤ 0 lets DynamoDB
// decide the page size; the cursor is base64 of the JSON wire form of the
// last evaluated key.
func (r *dynamoRepository) ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(gsi3PKEntityConfig(r.nsID, resource))},
	}
	if pageSize > 0 {
		in.Limit = aws.Int32(int32(min(pageSize, 1<<30)))
	}
	if cursor != "" {
		start, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = start
	}
	out, err := r.client.Query(ctx, in)
	if err != nil {
		return nil, "", wrapErr("list entities with custom limits", err)
	}
	items := r.ownIndexItems(ctx, indexGSI3, r.nsID, out.Items)
	ids := make([]string, 0, len(items))
	for _, item := range items {
		if id, ok := schemaGetS(item, attrGSI3SK); ok {
			ids = append(ids, id)
		}
	}
	return ids, encodeCursor(out.LastEvaluatedKey), nil
}

// encodeCursor encodes a LastEvaluatedKey of string attributes as base64
// of its JSON wire format.
func encodeCursor(key map[string]types.AttributeValue) string {
	if len(key) == 0 {
		return ""
	}
	wire := make(map[string]map[string]string, len(key))
	for k, v := range key {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			wire[k] = map[string]string{"S": s.Value}
		}
	}
	b, _ := json.Marshal(wire)
	return base64.StdEncoding.EncodeToString(b)
}

func decodeCursor(cursor string) (map[string]types.AttributeValue, error) {
	bad := store.NewValidationError(ErrValidation, "cursor", cursor, "not a cursor returned by ListEntitiesWithCustomLimits")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cursor))
	if err != nil {
		return nil, bad
	}
	var wire map[string]map[string]string
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, bad
	}
	key := make(map[string]types.AttributeValue, len(wire))
	for k, v := range wire {
		s, ok := v["S"]
		if !ok {
			return nil, bad
		}
		key[k] = schemaS(s)
	}
	return key, nil
}

// maxBatchWriteItems is DynamoDB's BatchWriteItem limit.
const maxBatchWriteItems = 25

// CreateEntity implements [Repository]: one PutItem of the META record,
// conditioned on its absence.
func (r *dynamoRepository) CreateEntity(ctx context.Context, e Entity) error {
	_, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(r.opts.Table),
		Item:                entityItem(r.nsID, e),
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return &EntityExistsError{EntityID: e.ID}
	}
	return wrapErr("create entity "+e.ID, err)
}

// GetEntity implements [Repository]: one GetItem of the META record.
func (r *dynamoRepository) GetEntity(ctx context.Context, id string) (Entity, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.opts.Table),
		Key:       primaryKey(pkEntity(r.nsID, id), skMeta),
	})
	if err != nil {
		return Entity{}, wrapErr("get entity "+id, err)
	}
	if len(out.Item) == 0 {
		return Entity{}, &EntityNotFoundError{EntityID: id}
	}
	return entityFromItem(out.Item), nil
}

// Children implements [Repository]: a Query of GSI1 (every page), keeping
// the entities of the namespace.
func (r *dynamoRepository) Children(ctx context.Context, parentID string) ([]Entity, error) {
	items, err := r.queryIndexAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI1),
		KeyConditionExpression:    aws.String("GSI1PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(gsi1PKParent(r.nsID, parentID))},
	})
	if err != nil {
		return nil, wrapErr("children of "+parentID, err)
	}
	out := make([]Entity, 0, len(items))
	for _, item := range items {
		out = append(out, entityFromItem(item))
	}
	return out, nil
}

// DeleteEntity implements [Repository]: a Query of the entity's partition
// (META, configs, usage snapshots; not the records of applied top-ups,
// which stay until they expire) and one of GSI3 (its buckets, those of
// the namespace only), deletes in batches of 25, and a decrement of the
// entity-config registry for each config deleted.
func (r *dynamoRepository) DeleteEntity(ctx context.Context, id string) (int, error) {
	pk := pkEntity(r.nsID, id)
	own, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pk)},
		ProjectionExpression:      aws.String("PK, SK"),
	})
	if err != nil {
		return 0, wrapErr("delete entity "+id, err)
	}
	buckets, err := r.queryIndexAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pk)},
	})
	if err != nil {
		return 0, wrapErr("delete entity "+id, err)
	}
	keys := make([]map[string]types.AttributeValue, 0, len(own)+len(buckets))
	var configResources []string
	for _, item := range append(own, buckets...) {
		sk, _ := schemaGetS(item, attrSK)
		if strings.HasPrefix(sk, skTopUpPrefix) {
			// The records of applied top-ups outlive the entity, as on
			// every backend: a top-up id stays applied until its record
			// expires, also for an entity created again with the id.
			continue
		}
		keys = append(keys, map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]})
		if strings.HasPrefix(sk, skConfigPrefix+"#") {
			configResources = append(configResources, strings.TrimPrefix(sk, skConfigPrefix+"#"))
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if err := r.batchDelete(ctx, keys); err != nil {
		return 0, wrapErr("delete entity "+id, err)
	}
	for _, res := range configResources {
		if err := r.decrementEntityConfigCount(ctx, res); err != nil {
			return len(keys), err
		}
	}
	return len(keys), nil
}

// batchDelete deletes keys with BatchWriteItem in chunks of 25, re-sending
// UnprocessedItems until none are left.
func (r *dynamoRepository) batchDelete(ctx context.Context, keys []map[string]types.AttributeValue) error {
	for start := 0; start < len(keys); start += maxBatchWriteItems {
		reqs := make([]types.WriteRequest, 0, maxBatchWriteItems)
		for _, k := range keys[start:min(start+maxBatchWriteItems, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		pending := map[string][]types.WriteRequest{r.opts.Table: reqs}
		for round := 0; len(pending) > 0; round++ {
			if round > 0 {
				if err := sleepContext(ctx, unprocessedBackoff<<min(round-1, 6)); err != nil {
					return err
				}
			}
			out, err := r.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("batch delete: %w", err)
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}
