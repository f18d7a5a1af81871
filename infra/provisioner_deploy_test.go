package infra

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
)

// TestDeployProvisionerAndLimitsStack deploys a stack with the provisioner
// on moto, then the stack `limits cfn-template` prints
// (provisioner.StackTemplate) for it. moto cannot run the Lambda (it needs
// Docker for that), so the test plays the Lambda: it runs the provisioner's
// handler, against moto's table, on the event of the custom resource, and
// the handler answers on moto's own ResponseURL, which completes the stack.
func TestDeployProvisionerAndLimitsStack(t *testing.T) {
	ctx := testContext(t)
	cfg := motoConfig(t)
	name := stackName(t)
	d := NewDeployer(cfg, func(o *DeployerOptions) {
		o.PollInterval = 20 * time.Millisecond
		o.ProvisionerZip = testZip(t, "echo provisioner")
	})
	opts := motoOptions()
	opts.EnableProvisioner = true
	st, err := d.Deploy(ctx, name, opts, testZip(t, "echo aggregator"))
	require.NoError(t, err)
	require.Equal(t, "CREATE_COMPLETE", st.Status)
	arn := st.Outputs["ProvisionerArn"]
	require.NotEmpty(t, arn, "outputs %v", st.Outputs)
	assert.Equal(t, name+"-limits-provisioner", st.Outputs["ProvisionerFunctionName"])
	assert.NotEmpty(t, st.Parameters[ParamProvisionerCodeS3Key])

	fn, err := lambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name + "-limits-provisioner")})
	require.NoError(t, err)
	assert.Equal(t, "provided.al2023", string(fn.Runtime))
	assert.Equal(t, "bootstrap", aws.ToString(fn.Handler))
	assert.Equal(t, name, fn.Environment.Variables["TABLE_NAME"])
	assert.Equal(t, codeSHA(testZip(t, "echo provisioner")), aws.ToString(fn.CodeSha256))

	cf := cloudformation.NewFromConfig(cfg)
	exports, err := cf.ListExports(ctx, &cloudformation.ListExportsInput{})
	require.NoError(t, err)
	found := false
	for _, e := range exports.Exports {
		if aws.ToString(e.Name) == provisioner.ExportName(name) {
			found = true
			assert.Equal(t, arn, aws.ToString(e.Value))
		}
	}
	assert.True(t, found, "no export %s", provisioner.ExportName(name))

	// The table's version record, as deploy writes it.
	client := dynamodb.NewFromConfig(cfg)
	_, err = limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) { o.Table = name })
	require.NoError(t, err)

	// The limits stack.
	props := provisioner.Properties{
		Namespace: "tenant-a",
		System:    &provisioner.System{OnUnavailable: "block", Limits: provisioner.Limits{"rpm": {Capacity: 1000}}},
		Resources: map[string]provisioner.Resource{"gpt-4o": {Limits: provisioner.Limits{"tpm": {Capacity: 50_000, RefillPeriod: 60}}}},
		Entities: map[string]provisioner.Entity{"key-1": {Resources: map[string]provisioner.Resource{
			"gpt-4o": {Limits: provisioner.Limits{"rpm": {Capacity: 10, RefillAmount: 5, RefillPeriod: 30}}}}}},
	}
	body, err := provisioner.StackTemplate(name, "Limits", props)
	require.NoError(t, err)
	out, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name + "-limits"), TemplateBody: aws.String(string(body))})
	require.NoError(t, err, "template:\n%s", body)
	stackID := aws.ToString(out.StackId)

	resolved := props
	resolved.TableName = name
	raw, err := json.Marshal(resolved)
	require.NoError(t, err)
	var rp map[string]any
	require.NoError(t, json.Unmarshal(raw, &rp))
	rp["ServiceToken"] = arn
	ev := cfn.Event{
		RequestType:        cfn.RequestCreate,
		RequestID:          "limits-create-1",
		ResponseURL:        aws.ToString(cfg.BaseEndpoint) + "/cloudformation_" + cfg.Region + "/cfnresponse?stack=" + stackID,
		ResourceType:       provisioner.ResourceType,
		LogicalResourceID:  "Limits",
		StackID:            stackID,
		ResourceProperties: rp,
	}
	h := &provisioner.Handler{Client: client}
	_, err = cfn.LambdaWrap(h.Handle)(ctx, ev)
	require.NoError(t, err)

	status := waitStack(ctx, t, cf, stackID)
	assert.Equal(t, "CREATE_COMPLETE", status)

	repo, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) { o.Table, o.Namespace = name, "tenant-a" })
	require.NoError(t, err)
	rl := limiter.New(repo)
	got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{limiter.PerMinute("tpm", 50_000)}, got)
	want := limiter.Limit{Name: "rpm", Capacity: 10, RefillAmount: 5, RefillPeriod: 30 * time.Second}
	err = want.Validate()
	require.NoError(t, err)
	got, err = rl.Admin().Limits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.Limit{want}, got)
	_, ou, err := rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	assert.Equal(t, limiter.OnUnavailableBlock, ou)
}

// waitStack polls until the stack leaves its IN_PROGRESS state.
func waitStack(ctx context.Context, t *testing.T, cf *cloudformation.Client, id string) string {
	t.Helper()
	for {
		out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(id)})
		require.NoError(t, err)
		require.Len(t, out.Stacks, 1)
		if s := string(out.Stacks[0].StackStatus); !inProgress(s) {
			return s
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "stack still in progress", "%s: %v", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
