package limiter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// checkConfigResource validates an entity-config resource: a resource name
// or [DefaultResource].
func checkConfigResource(resource string) error {
	if resource == DefaultResource {
		return nil
	}
	return ValidateResource(resource)
}

// SetLimits stores limits for entityID on resource (or [DefaultResource] for
// every resource without its own), replacing any stored before. It updates
// the shard-0 bucket's parameters (entity-config buckets never expire),
// evicts the cached config and records a limits_set audit event. Every input
// is validated before the first write.
func (r *DynamoDBRepository) SetLimits(ctx context.Context, entityID, resource string, limits []Limit) error {
	if err := ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if err := checkConfigResource(resource); err != nil {
		return err
	}
	if err := validateLimits(limits); err != nil {
		return err
	}
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	item := entityConfigItem(r.nsID, entityID, resource, limits)
	_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(r.opts.Table), Item: item, ConditionExpression: aws.String("attribute_not_exists(PK)")}},
		{Update: r.registryCountUpdate(resource, 1)},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		// The config existed (and is counted): replace it.
		_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item})
	}
	if err != nil {
		return wrapErr("set limits "+entityID+"/"+resource, err)
	}
	r.cache.evict(configKey{level: levelEntity, entityID: entityID, resource: resource})
	if err := r.SyncBucket(ctx, entityID, resource, limits, TTLRemove, 0, nil); err != nil {
		return err
	}
	return r.logAudit(ctx, principal, AuditLimitsSet, entityID, resource, map[string]any{"limits": auditLimitDetails(limits)})
}

// registryCountUpdate adds delta to the entity-config registry's counter of
// resource.
func (r *DynamoDBRepository) registryCountUpdate(resource string, delta int64) *types.Update {
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
func (r *DynamoDBRepository) removeZeroRegistryCount(ctx context.Context, resource string) error {
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
func (r *DynamoDBRepository) decrementEntityConfigCount(ctx context.Context, resource string) error {
	u := r.registryCountUpdate(resource, -1)
	_, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
	})
	if err != nil {
		return wrapErr("update entity config registry", err)
	}
	return r.removeZeroRegistryCount(ctx, resource)
}

// GetLimits returns the limits stored for entityID on resource (nil when
// none).
func (r *DynamoDBRepository) GetLimits(ctx context.Context, entityID, resource string) ([]Limit, error) {
	return r.getConfig(ctx, primaryKey(pkEntity(r.nsID, entityID), skConfig(resource)))
}

func (r *DynamoDBRepository) getConfigItem(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.opts.Table), Key: key, ConsistentRead: aws.Bool(false)})
	if err != nil {
		return nil, wrapErr("get config", err)
	}
	return out.Item, nil
}

func (r *DynamoDBRepository) getConfig(ctx context.Context, key map[string]types.AttributeValue) ([]Limit, error) {
	item, err := r.getConfigItem(ctx, key)
	if err != nil || len(item) == 0 {
		return nil, err
	}
	return limitsFromItem(item)
}

// DeleteLimits deletes the limits stored for entityID on resource, evicts the
// cached config and records a limits_deleted audit event. Deleting a missing
// config does nothing. Buckets are left as they are; [RateLimiter.DeleteLimits]
// also reconciles them with the limits that apply next.
func (r *DynamoDBRepository) DeleteLimits(ctx context.Context, entityID, resource string) error {
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName: aws.String(r.opts.Table), Key: primaryKey(pkEntity(r.nsID, entityID), skConfig(resource)),
			ConditionExpression: aws.String("attribute_exists(PK)"),
		}},
		{Update: r.registryCountUpdate(resource, -1)},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		return nil
	}
	if err != nil {
		return wrapErr("delete limits "+entityID+"/"+resource, err)
	}
	r.cache.evict(configKey{level: levelEntity, entityID: entityID, resource: resource})
	if err := r.removeZeroRegistryCount(ctx, resource); err != nil {
		return err
	}
	return r.logAudit(ctx, principal, AuditLimitsDeleted, entityID, resource, nil)
}

// SyncBucket updates the shard-0 bucket's stored parameters to limits (and
// initialises limits the item lacks as full, fix B1), applies the TTL mode
// and removes the attributes of stale limits. A missing bucket is skipped.
func (r *DynamoDBRepository) SyncBucket(ctx context.Context, entityID, resource string, limits []Limit, ttl TTLMode, ttlSeconds int64, stale []string) error {
	if len(limits) == 0 {
		return nil
	}
	b := newExprBuilder()
	var set, remove []string
	for _, l := range limits {
		cp := b.n(l.Capacity * 1000)
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		set = append(set,
			b.name(bucketAttr(l.Name, fieldCapacity))+" = "+cp,
			b.name(bucketAttr(l.Name, fieldRefillAmount))+" = "+b.n(l.RefillAmount*1000),
			b.name(bucketAttr(l.Name, fieldRefillPeriod))+" = "+b.n(l.RefillPeriod.Milliseconds()),
			tk+" = if_not_exists("+tk+", "+cp+")")
	}
	switch ttl {
	case TTLSet:
		set = append(set, b.name(attrTTL)+" = "+b.n(ttlEpochSeconds(r.nowMs(), ttlSeconds)))
	case TTLRemove:
		remove = append(remove, b.name(attrTTL))
	}
	for _, name := range stale {
		for _, f := range []string{fieldTokens, fieldCapacity, fieldRefillAmount, fieldRefillPeriod, fieldTotalConsumed} {
			remove = append(remove, b.name(bucketAttr(name, f)))
		}
	}
	u := b.update(r.opts.Table, bucketPrimaryKey(r.nsID, entityID, resource, 0), updateExpr(set, nil, remove),
		[]string{"attribute_exists(" + b.name(attrPK) + ")"})
	_, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return wrapErr("sync bucket "+entityID+"/"+resource, err)
}

// SetResourceDefaults stores the default limits of resource (used by
// entities without their own), registers the resource, evicts the cached
// config and records a limits_set audit event.
func (r *DynamoDBRepository) SetResourceDefaults(ctx context.Context, resource string, limits []Limit) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	if err := validateLimits(limits); err != nil {
		return err
	}
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	if _, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.opts.Table), Item: resourceConfigItem(r.nsID, resource, limits),
	}); err != nil {
		return wrapErr("set resource defaults "+resource, err)
	}
	r.cache.evict(configKey{level: levelResource, resource: resource})
	if err := r.updateResourceRegistry(ctx, "ADD", resource); err != nil {
		return err
	}
	return r.logAudit(ctx, principal, AuditLimitsSet, auditEntityResource(resource), resource, map[string]any{"limits": auditLimitDetails(limits)})
}

// updateResourceRegistry adds (op "ADD") or removes (op "DELETE") resource
// from the registry's string set.
func (r *DynamoDBRepository) updateResourceRegistry(ctx context.Context, op, resource string) error {
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

// GetResourceDefaults returns the default limits of resource (nil when none).
func (r *DynamoDBRepository) GetResourceDefaults(ctx context.Context, resource string) ([]Limit, error) {
	if err := ValidateResource(resource); err != nil {
		return nil, err
	}
	return r.getConfig(ctx, primaryKey(pkResource(r.nsID, resource), skConfig("")))
}

// DeleteResourceDefaults deletes the default limits of resource, evicts the
// cached config and records a limits_deleted audit event.
func (r *DynamoDBRepository) DeleteResourceDefaults(ctx context.Context, resource string) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(r.opts.Table), Key: primaryKey(pkResource(r.nsID, resource), skConfig("")),
	}); err != nil {
		return wrapErr("delete resource defaults "+resource, err)
	}
	r.cache.evict(configKey{level: levelResource, resource: resource})
	if err := r.updateResourceRegistry(ctx, "DELETE", resource); err != nil {
		return err
	}
	return r.logAudit(ctx, principal, AuditLimitsDeleted, auditEntityResource(resource), resource, nil)
}

// ListResourcesWithDefaults returns, sorted, the resources with default
// limits.
func (r *DynamoDBRepository) ListResourcesWithDefaults(ctx context.Context) ([]string, error) {
	item, err := r.getConfigItem(ctx, primaryKey(pkSystem(r.nsID), skResources))
	if err != nil {
		return nil, err
	}
	return resourceRegistryFromItem(item), nil
}

// ListResourcesWithEntityConfigs returns, sorted, the resources for which at
// least one entity has stored limits.
func (r *DynamoDBRepository) ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	item, err := r.getConfigItem(ctx, primaryKey(pkSystem(r.nsID), skEntityConfigResources))
	if err != nil {
		return nil, err
	}
	return entityConfigRegistryFromItem(item)
}

// SetSystemDefaults stores the namespace-wide default limits and
// on-unavailable mode ("" leaves it unset), replacing what was stored,
// evicts the cached config and records a limits_set audit event.
func (r *DynamoDBRepository) SetSystemDefaults(ctx context.Context, limits []Limit, onUnavailable OnUnavailable) error {
	if err := validateLimits(limits); err != nil {
		return err
	}
	if onUnavailable != "" && !onUnavailable.Valid() {
		return newValidationError(ErrValidation, "on_unavailable", string(onUnavailable), "must be 'allow' or 'block'")
	}
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	if _, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.opts.Table), Item: systemConfigItem(r.nsID, limits, onUnavailable),
	}); err != nil {
		return wrapErr("set system defaults", err)
	}
	r.cache.evict(configKey{level: levelSystem})
	var ou any
	if onUnavailable != "" {
		ou = string(onUnavailable)
	}
	return r.logAudit(ctx, principal, AuditLimitsSet, auditEntitySystem, "",
		map[string]any{"limits": auditLimitDetails(limits), "on_unavailable": ou})
}

// GetSystemDefaults returns the namespace-wide default limits and
// on-unavailable mode ("" when unset).
func (r *DynamoDBRepository) GetSystemDefaults(ctx context.Context) ([]Limit, OnUnavailable, error) {
	item, err := r.getConfigItem(ctx, primaryKey(pkSystem(r.nsID), skConfig("")))
	if err != nil || len(item) == 0 {
		return nil, "", err
	}
	limits, err := limitsFromItem(item)
	if err != nil {
		return nil, "", err
	}
	return limits, onUnavailableFromItem(item), nil
}

// DeleteSystemDefaults deletes the namespace-wide defaults, evicts the cached
// config and records a limits_deleted audit event.
func (r *DynamoDBRepository) DeleteSystemDefaults(ctx context.Context) error {
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	limits, ou, err := r.GetSystemDefaults(ctx)
	if err != nil {
		return err
	}
	if _, err := r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(r.opts.Table), Key: primaryKey(pkSystem(r.nsID), skConfig("")),
	}); err != nil {
		return wrapErr("delete system defaults", err)
	}
	r.cache.evict(configKey{level: levelSystem})
	names := make([]any, len(limits))
	for i, l := range limits {
		names[i] = l.Name
	}
	var ouv any
	if ou != "" {
		ouv = string(ou)
	}
	return r.logAudit(ctx, principal, AuditLimitsDeleted, auditEntitySystem, "", map[string]any{"limits": names, "on_unavailable": ouv})
}

// ListEntitiesWithCustomLimits returns a page of the entities with stored
// limits for resource, and the cursor of the next page ("" at the end).
// pageSize ≤ 0 lets DynamoDB decide the page size.
func (r *DynamoDBRepository) ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
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
	ids := make([]string, 0, len(out.Items))
	for _, item := range out.Items {
		if id, ok := schemaGetS(item, attrGSI3SK); ok {
			ids = append(ids, id)
		}
	}
	return ids, encodeCursor(out.LastEvaluatedKey), nil
}

// encodeCursor encodes a LastEvaluatedKey of string attributes as the
// original does: base64 of its JSON wire format.
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
	bad := newValidationError(ErrValidation, "cursor", cursor, "not a cursor returned by ListEntitiesWithCustomLimits")
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
