package infra

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/aggregator"
)

// motoOptions are the defaults plus what moto needs: moto resolves the
// Export of every output, its Condition notwithstanding, and fails on the
// role outputs when the roles are not created; so the moto tests create
// them.
func motoOptions() StackOptions {
	o := DefaultStackOptions()
	o.CreateIAMRoles = true
	return o
}

type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) statuses() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s []string
	for _, e := range l.events {
		s = append(s, e.LogicalID+" "+e.Status)
	}
	return s
}

func newTestDeployer(t *testing.T, log *eventLog) *Deployer {
	cfg := motoConfig(t)
	return NewDeployer(cfg, func(o *DeployerOptions) {
		o.PollInterval = 20 * time.Millisecond
		if log != nil {
			o.Progress = log.add
		}
	})
}

func codeSHA(zip []byte) string {
	sum := sha256.Sum256(zip)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// TestDeployCreatesStack deploys with the defaults and checks every
// resource the aggregator depends on, as the emulator reports it.
func TestDeployCreatesStack(t *testing.T) {
	ctx := testContext(t)
	var log eventLog
	d := newTestDeployer(t, &log)
	cfg := motoConfig(t)
	name := stackName(t)
	zip := testZip(t, "echo v1")

	start := time.Now()
	st, err := d.Deploy(ctx, name, motoOptions(), zip)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	t.Logf("deployed in %v; events %v", time.Since(start).Round(time.Millisecond), log.statuses())
	if st.Status != "CREATE_COMPLETE" || st.Name != name || st.ID == "" {
		t.Fatalf("stack %s %q id %q, want CREATE_COMPLETE", st.Name, st.Status, st.ID)
	}
	if got := log.statuses(); !slices.Contains(got, name+" CREATE_COMPLETE") {
		t.Errorf("Progress got %v, want the stack's CREATE_COMPLETE", got)
	}

	// Outputs.
	for _, k := range []string{
		"TableName", "TableArn", "StreamArn", "SchemaVersion", "AggregatorFunctionName", "AggregatorFunctionArn",
		"AggregatorDLQUrl", "AggregatorDLQArn", "AuditArchiveBucketName", "AuditArchiveBucketArn",
		"AcquireOnlyPolicyArn", "FullAccessPolicyArn", "ReadOnlyPolicyArn", "AppRoleArn", "AdminRoleArn", "ReadOnlyRoleArn",
	} {
		if st.Outputs[k] == "" {
			t.Errorf("output %s missing; outputs %v", k, st.Outputs)
		}
	}
	if st.Outputs["TableName"] != name || st.Outputs["AggregatorFunctionName"] != name+"-aggregator" || st.Outputs["SchemaVersion"] != limiter.SchemaVersion {
		t.Errorf("outputs TableName %q, AggregatorFunctionName %q, SchemaVersion %q", st.Outputs["TableName"], st.Outputs["AggregatorFunctionName"], st.Outputs["SchemaVersion"])
	}
	if _, ok := st.Outputs["PermissionBoundaryArn"]; ok {
		t.Error("PermissionBoundaryArn output without a boundary")
	}

	// The table: the schema's definition.
	ddb := dynamodb.NewFromConfig(cfg)
	td, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	if diff := cmp.Diff(shapeOfSchema(limiter.TableDefinition(name)), shapeOfDescription(td.Table)); diff != "" {
		t.Errorf("deployed table differs from limiter.TableDefinition (-schema +deployed):\n%s", diff)
	}
	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeTimeToLive: %v", err)
	}
	switch d := ttl.TimeToLiveDescription; {
	case d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled && aws.ToString(d.AttributeName) == "ttl":
	case d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusDisabled && d.AttributeName == nil:
		// moto's CloudFormation ignores TimeToLiveSpecification (and the
		// PITR and deletion-protection settings' effects);
		// TestTemplateTableMatchesSchema checks the template sets it.
		t.Log("moto gap: TimeToLiveSpecification not applied by CloudFormation")
	default:
		t.Errorf("TTL %s on %q, want ENABLED on ttl", d.TimeToLiveStatus, aws.ToString(d.AttributeName))
	}

	// The function.
	lam := lambda.NewFromConfig(cfg)
	fn, err := lam.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name + "-aggregator")})
	if err != nil {
		t.Fatalf("GetFunctionConfiguration: %v", err)
	}
	if fn.Runtime != lambdatypes.RuntimeProvidedal2023 || aws.ToString(fn.Handler) != "bootstrap" {
		t.Errorf("function runtime %q handler %q, want provided.al2023 bootstrap", fn.Runtime, aws.ToString(fn.Handler))
	}
	switch arch := fn.Architectures; {
	case slices.Equal(arch, []lambdatypes.Architecture{lambdatypes.ArchitectureArm64}):
	case slices.Equal(arch, []lambdatypes.Architecture{lambdatypes.ArchitectureX8664}):
		// moto's CloudFormation drops Architectures (Lambda's default,
		// x86_64, remains); TestTemplateAggregatorFunction checks the
		// template asks for arm64.
		t.Log("moto gap: Architectures not applied by CloudFormation")
	default:
		t.Errorf("function architectures %v, want [arm64]", arch)
	}
	if aws.ToInt32(fn.MemorySize) != 256 || aws.ToInt32(fn.Timeout) != 60 {
		t.Errorf("function memory %d timeout %d, want 256, 60", aws.ToInt32(fn.MemorySize), aws.ToInt32(fn.Timeout))
	}
	if got := aws.ToString(fn.CodeSha256); got != codeSHA(zip) {
		t.Errorf("function CodeSha256 %s, want the zip's %s", got, codeSHA(zip))
	}
	env := fn.Environment.Variables
	wantEnv := map[string]string{
		aggregator.EnvTableName:       name,
		aggregator.EnvSnapshotWindows: "hourly,daily",
		aggregator.EnvSnapshotTTLDays: "90",
		aggregator.EnvEnableArchival:  "true",
		aggregator.EnvArchiveBucket:   st.Outputs["AuditArchiveBucketName"],
	}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("function environment (-want +got):\n%s", diff)
	}
	ac, err := aggregator.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("aggregator.LoadConfig(function environment): %v", err)
	}
	if ac.Table != name || !ac.ArchiveEnabled || ac.ArchiveBucket == "" || ac.SnapshotTTLDays != 90 || len(ac.Windows) != 2 {
		t.Errorf("aggregator config from the function's environment: %+v", ac)
	}

	// The event source mapping: the table's stream to the function.
	esms, err := lam.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(name + "-aggregator")})
	if err != nil {
		t.Fatalf("ListEventSourceMappings: %v", err)
	}
	if len(esms.EventSourceMappings) != 1 {
		t.Fatalf("%d event source mappings, want 1", len(esms.EventSourceMappings))
	}
	m := esms.EventSourceMappings[0]
	if got := aws.ToString(m.EventSourceArn); got != aws.ToString(td.Table.LatestStreamArn) || got != st.Outputs["StreamArn"] {
		t.Errorf("mapping source %s, want the table's stream %s", got, aws.ToString(td.Table.LatestStreamArn))
	}
	if !slices.Equal(m.FunctionResponseTypes, []lambdatypes.FunctionResponseType{lambdatypes.FunctionResponseTypeReportBatchItemFailures}) {
		t.Errorf("FunctionResponseTypes %v, want [ReportBatchItemFailures]", m.FunctionResponseTypes)
	}
	if aws.ToInt32(m.BatchSize) != 100 || aws.ToInt32(m.MaximumBatchingWindowInSeconds) != 5 || aws.ToInt32(m.MaximumRetryAttempts) != 3 ||
		aws.ToInt32(m.MaximumRecordAgeInSeconds) != 3600 || !aws.ToBool(m.BisectBatchOnFunctionError) || m.StartingPosition != lambdatypes.EventSourcePositionLatest {
		t.Errorf("mapping batch %d window %d retries %d age %d bisect %v start %s",
			aws.ToInt32(m.BatchSize), aws.ToInt32(m.MaximumBatchingWindowInSeconds), aws.ToInt32(m.MaximumRetryAttempts),
			aws.ToInt32(m.MaximumRecordAgeInSeconds), aws.ToBool(m.BisectBatchOnFunctionError), m.StartingPosition)
	}
	if m.DestinationConfig == nil || m.DestinationConfig.OnFailure == nil || aws.ToString(m.DestinationConfig.OnFailure.Destination) != st.Outputs["AggregatorDLQArn"] {
		t.Errorf("mapping on-failure destination %+v, want the DLQ %s", m.DestinationConfig, st.Outputs["AggregatorDLQArn"])
	}
	if m.FilterCriteria == nil || len(m.FilterCriteria.Filters) != 2 || !strings.Contains(aws.ToString(m.FilterCriteria.Filters[1].Pattern), `"#AUDIT#"`) {
		t.Errorf("mapping filter criteria %+v", m.FilterCriteria)
	}

	// The stack's tags carry the managed ones.
	if st.Parameters[ParamCodeS3Key] == "" || !strings.HasPrefix(st.Parameters[ParamCodeS3Key], name+"/aggregator-") {
		t.Errorf("code key parameter %q", st.Parameters[ParamCodeS3Key])
	}
}

// TestDeployUpdatesCode deploys twice with different code, then once more
// without code: the second updates the function, the third changes nothing.
func TestDeployUpdatesCode(t *testing.T) {
	ctx := testContext(t)
	var log eventLog
	d := newTestDeployer(t, &log)
	cfg := motoConfig(t)
	name := stackName(t)
	v1, v2 := testZip(t, "echo v1"), testZip(t, "echo v2")
	first, err := d.Deploy(ctx, name, motoOptions(), v1)
	if err != nil {
		t.Fatalf("first Deploy: %v", err)
	}
	opts := motoOptions()
	opts.LambdaMemory = 512
	second, err := d.Deploy(ctx, name, opts, v2)
	if err != nil {
		t.Fatalf("second Deploy: %v", err)
	}
	if second.Status != "UPDATE_COMPLETE" || second.ID != first.ID {
		t.Errorf("after update: status %q id %q, want UPDATE_COMPLETE of %q", second.Status, second.ID, first.ID)
	}
	lam := lambda.NewFromConfig(cfg)
	fn, err := lam.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name + "-aggregator")})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(fn.CodeSha256); got != codeSHA(v2) {
		t.Errorf("CodeSha256 after update %s, want v2's %s (v1's is %s)", got, codeSHA(v2), codeSHA(v1))
	}
	if aws.ToInt32(fn.MemorySize) != 512 {
		t.Errorf("memory after update %d, want 512", aws.ToInt32(fn.MemorySize))
	}
	if first.Parameters[ParamCodeS3Key] == second.Parameters[ParamCodeS3Key] {
		t.Errorf("code key unchanged: %s", second.Parameters[ParamCodeS3Key])
	}
	// Only the current zip is left in the artifacts bucket.
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	objs, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(second.Parameters[ParamCodeS3Bucket]), Prefix: aws.String(name + "/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if !slices.Equal(keys, []string{second.Parameters[ParamCodeS3Key]}) {
		t.Errorf("artifacts %v, want only %s", keys, second.Parameters[ParamCodeS3Key])
	}

	// Same options, no code: nothing to update, the code stays.
	third, err := d.Deploy(ctx, name, opts, nil)
	if err != nil {
		t.Fatalf("third Deploy (no changes): %v", err)
	}
	if third.Parameters[ParamCodeS3Key] != second.Parameters[ParamCodeS3Key] {
		t.Errorf("code key after a deploy without code %q, want %q", third.Parameters[ParamCodeS3Key], second.Parameters[ParamCodeS3Key])
	}
}

// TestDeployWithoutCodeFails: a new stack with the aggregator needs code.
func TestDeployWithoutCodeFails(t *testing.T) {
	d := newTestDeployer(t, nil)
	_, err := d.Deploy(testContext(t), stackName(t), motoOptions(), nil)
	if !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Deploy(no code) = %v, want ErrInvalidOptions", err)
	}
	_, err = d.Deploy(testContext(t), stackName(t), motoOptions(), []byte("not a zip"))
	if !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Deploy(bad zip) = %v, want ErrInvalidOptions", err)
	}
}

// TestDeployCreateRejected: a table of the stack's name already exists.
// moto creates a stack's resources inside CreateStack and answers an error
// instead of reaching CREATE_FAILED (TestStackErrorNamesFirstFailure covers
// failed states).
func TestDeployCreateRejected(t *testing.T) {
	ctx := testContext(t)
	d := newTestDeployer(t, nil)
	name := stackName(t)
	ddb := dynamodb.NewFromConfig(motoConfig(t))
	if _, err := ddb.CreateTable(ctx, limiter.TableDefinition(name)); err != nil {
		t.Fatal(err)
	}
	_, err := d.Deploy(ctx, name, motoOptions(), testZip(t, "x"))
	if err == nil {
		t.Fatal("Deploy over an existing table succeeded")
	}
	if !strings.Contains(err.Error(), "create stack "+name) {
		t.Errorf("Deploy over an existing table = %v, want it to name the stack", err)
	}
}

func TestStatusMissingStack(t *testing.T) {
	d := newTestDeployer(t, nil)
	ctx := testContext(t)
	if _, err := d.Status(ctx, "zl-missing-stack"); !errors.Is(err, ErrStackNotFound) {
		t.Errorf("Status(missing) = %v, want ErrStackNotFound", err)
	}
	if err := d.Delete(ctx, "zl-missing-stack", true); !errors.Is(err, ErrStackNotFound) {
		t.Errorf("Delete(missing) = %v, want ErrStackNotFound", err)
	}
}

// TestDeleteRemovesEverything deletes a stack whose archive bucket holds an
// object.
func TestDeleteRemovesEverything(t *testing.T) {
	ctx := testContext(t)
	var log eventLog
	d := newTestDeployer(t, &log)
	cfg := motoConfig(t)
	name := stackName(t)
	st, err := d.Deploy(ctx, name, motoOptions(), testZip(t, "x"))
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	archive := st.Outputs["AuditArchiveBucketName"]
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(archive), Key: aws.String("audit/year=2026/month=01/day=01/a.jsonl.gz"), Body: bytes.NewReader([]byte("x")),
	}); err != nil {
		t.Fatal(err)
	}

	if err := d.Delete(ctx, name, true); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := d.Status(ctx, name); !errors.Is(err, ErrStackNotFound) {
		t.Errorf("Status after Delete = %v, want ErrStackNotFound", err)
	}
	if got := log.statuses(); !slices.Contains(got, name+" DELETE_COMPLETE") {
		t.Errorf("Progress got %v, want the stack's DELETE_COMPLETE", got)
	}
	var rnf *ddbtypes.ResourceNotFoundException
	if _, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); !errors.As(err, &rnf) {
		t.Errorf("DescribeTable after Delete = %v, want ResourceNotFoundException", err)
	}
	lam := lambda.NewFromConfig(cfg)
	var fnf *lambdatypes.ResourceNotFoundException
	if _, err := lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name + "-aggregator")}); !errors.As(err, &fnf) {
		t.Errorf("GetFunction after Delete = %v, want ResourceNotFoundException", err)
	}
	esms, err := lam.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(st.Outputs["StreamArn"])})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(esms.EventSourceMappings); n != 0 {
		t.Errorf("%d event source mappings on the stream after Delete, want 0", n)
	}
	if _, err := s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(archive)}); !isS3NotFound(err) {
		t.Errorf("HeadBucket(archive) after Delete = %v, want not found", err)
	}
	objs, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(st.Parameters[ParamCodeS3Bucket]), Prefix: aws.String(name + "/")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(objs.Contents); n != 0 {
		t.Errorf("%d aggregator zips left after Delete, want 0", n)
	}
}

// TestDeleteRefusesProtectedTable: with deletion protection nothing is
// touched.
func TestDeleteRefusesProtectedTable(t *testing.T) {
	ctx := testContext(t)
	d := newTestDeployer(t, nil)
	name := stackName(t)
	o := motoOptions()
	o.EnableDeletionProtection = true
	st, err := d.Deploy(ctx, name, o, testZip(t, "x"))
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if err := d.Delete(ctx, name, true); err == nil {
		t.Fatal("Delete of a protected stack succeeded")
	}
	if got, err := d.Status(ctx, name); err != nil || got.Status != st.Status {
		t.Errorf("after the refused Delete: %+v, %v", got.Status, err)
	}
}

func TestStackErrorNamesFirstFailure(t *testing.T) {
	ev := func(id, typ, status, reason string) cfntypes.StackEvent {
		return cfntypes.StackEvent{LogicalResourceId: aws.String(id), ResourceType: aws.String(typ), ResourceStatus: cfntypes.ResourceStatus(status), ResourceStatusReason: aws.String(reason)}
	}
	events := []cfntypes.StackEvent{
		ev("s", "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS", "User Initiated"),
		ev("RateLimitsTable", "AWS::DynamoDB::Table", "CREATE_IN_PROGRESS", ""),
		ev("AggregatorRole", "AWS::IAM::Role", "CREATE_FAILED", "s-aggr already exists"),
		ev("RateLimitsTable", "AWS::DynamoDB::Table", "CREATE_FAILED", "Resource creation cancelled"),
		ev("s", "AWS::CloudFormation::Stack", "ROLLBACK_IN_PROGRESS", "The following resource(s) failed to create: [AggregatorRole]"),
		ev("s", "AWS::CloudFormation::Stack", "ROLLBACK_COMPLETE", ""),
	}
	res, reason := firstFailure(events, "s", "")
	if res != "AggregatorRole" || reason != "s-aggr already exists" {
		t.Errorf("firstFailure = %q, %q; want AggregatorRole and its reason", res, reason)
	}
	err := error(&StackError{Stack: "s", Operation: "create", Status: "ROLLBACK_COMPLETE", Resource: res, Reason: reason})
	if want := "infra: create stack s: ROLLBACK_COMPLETE: AggregatorRole failed: s-aggr already exists"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(err, ErrDeployFailed) {
		t.Error("StackError does not match ErrDeployFailed")
	}
	// Only the stack failed: name it with its reason.
	res, reason = firstFailure([]cfntypes.StackEvent{ev("s", "AWS::CloudFormation::Stack", "UPDATE_FAILED", "boom")}, "s", "")
	if res != "s" || reason != "boom" {
		t.Errorf("firstFailure(stack only) = %q, %q", res, reason)
	}
}

// TestDeployRestoresCode: the function's code was changed outside the
// stack; a deploy of the same zip (no stack change) points it back at the
// zip.
func TestDeployRestoresCode(t *testing.T) {
	ctx := testContext(t)
	d := newTestDeployer(t, nil)
	cfg := motoConfig(t)
	name := stackName(t)
	zip := testZip(t, "echo v1")
	if _, err := d.Deploy(ctx, name, motoOptions(), zip); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	lam := lambda.NewFromConfig(cfg)
	fn := aws.String(name + "-aggregator")
	other := testZip(t, "echo other")
	if _, err := lam.UpdateFunctionCode(ctx, &lambda.UpdateFunctionCodeInput{FunctionName: fn, ZipFile: other}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Deploy(ctx, name, motoOptions(), zip); err != nil {
		t.Fatalf("second Deploy: %v", err)
	}
	got, err := lam.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: fn})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(got.CodeSha256) != codeSHA(zip) {
		t.Errorf("CodeSha256 %s, want the deployed zip's %s (the outside code's is %s)", aws.ToString(got.CodeSha256), codeSHA(zip), codeSHA(other))
	}
}

func TestAPIErrorRecognition(t *testing.T) {
	for _, tc := range []struct {
		err                 error
		notFound, noUpdates bool
	}{
		{&smithy.GenericAPIError{Code: "ValidationError", Message: "Stack with id zl does not exist"}, true, false},
		{&smithy.GenericAPIError{Code: "ValidationError", Message: "No updates are to be performed."}, false, true},
		{fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "ValidationError", Message: "No updates are to be performed."}), false, true},
		{&smithy.GenericAPIError{Code: "ValidationError", Message: "Template format error"}, false, false},
		{&smithy.GenericAPIError{Code: "AccessDenied", Message: "does not exist"}, false, false},
		{nil, false, false},
	} {
		if got := isNotFound(tc.err); got != tc.notFound {
			t.Errorf("isNotFound(%v) = %v", tc.err, got)
		}
		if got := isNoUpdates(tc.err); got != tc.noUpdates {
			t.Errorf("isNoUpdates(%v) = %v", tc.err, got)
		}
	}
}
