package infra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"go.yaml.in/yaml/v3"
)

// List returns the limiter stacks of the deployer's region: every stack
// (deleted ones excepted) tagged ManagedBy=zae-limiter, whichever client
// deployed it, sorted by name.
func (d *Deployer) List(ctx context.Context) ([]Stack, error) {
	var out []Stack
	p := cloudformation.NewDescribeStacksPaginator(d.cfn, &cloudformation.DescribeStacksInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("infra: list stacks: %w", err)
		}
		for _, s := range page.Stacks {
			if s.StackStatus == cfntypes.StackStatusDeleteComplete {
				continue
			}
			st := stackOf(s)
			if st.Tags[TagManagedBy] == managedByValue && st.Tags[TagType] != "loadtest" {
				out = append(out, st)
			}
		}
	}
	slices.SortFunc(out, func(a, b Stack) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// UpgradeOptions configure [Deployer.Upgrade].
type UpgradeOptions struct {
	// AggregatorZip and ProvisionerZip are the new code; nil leaves that
	// function's code as it is.
	AggregatorZip, ProvisionerZip []byte
	// LambdaOnly updates the functions' code directly (UpdateFunctionCode)
	// and leaves the stack, its template and its tags alone.
	LambdaOnly bool
}

// Upgrade brings an existing stack to this module's version: it uploads the
// new Lambda code and updates the stack with the embedded template, every
// parameter kept at its previous value but the code locations (new
// parameters take their defaults), and the managed discovery tags
// (ManagedBy, zae-limiter:name, :type, :version, :lambda-version,
// :schema-version) added to the stack's own; then it makes sure each
// function runs the new code. With LambdaOnly it only points the functions
// at the new code. It returns the stack as it is afterwards.
func (d *Deployer) Upgrade(ctx context.Context, stackName string, o UpgradeOptions) (Stack, error) {
	existing, err := d.settledStack(ctx, stackName)
	if err != nil {
		return Stack{}, err
	}
	if !succeeded(existing.Status) {
		return Stack{}, fmt.Errorf("infra: upgrade %s: the stack is %s", stackName, existing.Status)
	}
	type code struct {
		kind, function, bucketParam, keyParam string
		zip                                   []byte
		obj                                   *codeObject
	}
	codes := []*code{
		{kind: "aggregator", function: stackName + "-aggregator", bucketParam: ParamCodeS3Bucket, keyParam: ParamCodeS3Key, zip: o.AggregatorZip},
		{kind: "provisioner", function: stackName + "-limits-provisioner", bucketParam: ParamProvisionerCodeS3Bucket, keyParam: ParamProvisionerCodeS3Key, zip: o.ProvisionerZip},
	}
	for _, c := range codes {
		// Only the functions the stack has.
		if c.zip == nil || existing.Parameters[c.keyParam] == "" {
			continue
		}
		if c.obj, err = d.uploadCode(ctx, stackName, c.kind, c.zip); err != nil {
			return Stack{}, err
		}
	}
	if !o.LambdaOnly {
		var params []cfntypes.Parameter
		declared, err := templateParameters()
		if err != nil {
			return Stack{}, err
		}
		newValue := map[string]string{}
		for _, c := range codes {
			if c.obj != nil {
				newValue[c.bucketParam], newValue[c.keyParam] = c.obj.bucket, c.obj.key
			}
		}
		for _, k := range declared {
			switch v, ok := newValue[k]; {
			case ok:
				params = append(params, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
			case hasKey(existing.Parameters, k):
				params = append(params, cfntypes.Parameter{ParameterKey: aws.String(k), UsePreviousValue: aws.Bool(true)})
			}
		}
		user := maps.Clone(existing.Tags)
		for _, k := range []string{TagManagedBy, TagName, TagType, TagVersion, TagLambdaVersion, TagSchemaVersion} {
			delete(user, k)
		}
		err = d.updateStack(ctx, stackName, "upgrade", &cloudformation.UpdateStackInput{
			StackName:    aws.String(existing.ID),
			TemplateBody: aws.String(string(template)),
			Parameters:   params,
			Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam},
			Tags:         stackTags(stackName, user),
		})
		if err != nil {
			return Stack{}, err
		}
	}
	for _, c := range codes {
		if c.obj == nil {
			continue
		}
		if err := d.ensureCode(ctx, c.function, c.obj); err != nil {
			return Stack{}, err
		}
		if !o.LambdaOnly {
			_ = d.removeArtifacts(ctx, c.obj.bucket, stackName+"/"+c.kind+"-", c.obj.key)
		}
	}
	return d.Status(ctx, stackName)
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// templateParameters returns the parameter names of the embedded template.
func templateParameters() ([]string, error) {
	var doc struct {
		Parameters map[string]yaml.Node `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return nil, fmt.Errorf("infra: parse the embedded template: %w", err)
	}
	if len(doc.Parameters) == 0 {
		return nil, errors.New("infra: the embedded template declares no parameters")
	}
	return slices.Sorted(maps.Keys(doc.Parameters)), nil
}
