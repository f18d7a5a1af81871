package provisioner

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ExportName returns the name of the export holding the provisioner's ARN
// in the stack mainStack: the ServiceToken of every Custom::ZaeLimiterLimits.
func ExportName(mainStack string) string { return mainStack + "-ProvisionerArn" }

// StackTemplate returns a CloudFormation template (YAML) with one
// Custom::ZaeLimiterLimits resource, logicalID, declaring p; its
// ServiceToken imports the provisioner of the stack mainStack (deployed
// with EnableProvisioner). `zae-limiter limits cfn-template` prints it.
func StackTemplate(mainStack, logicalID string, p Properties) ([]byte, error) {
	if p.TableName == "" {
		p.TableName = mainStack
	}
	if _, err := p.desired(); err != nil {
		return nil, fmt.Errorf("invalid limits: %w", err)
	}
	p.ServiceToken = ""
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var props map[string]any
	if err := json.Unmarshal(b, &props); err != nil {
		return nil, err
	}
	props["ServiceToken"] = map[string]any{"Fn::ImportValue": ExportName(mainStack)}
	tpl := struct {
		Version     string         `yaml:"AWSTemplateFormatVersion"`
		Description string         `yaml:"Description"`
		Resources   map[string]any `yaml:"Resources"`
		Outputs     map[string]any `yaml:"Outputs"`
	}{
		Version:     "2010-09-09",
		Description: fmt.Sprintf("zae-limiter limits of namespace %s in %s (Custom::ZaeLimiterLimits, served by %s's provisioner)", p.Namespace, p.TableName, mainStack),
		Resources:   map[string]any{logicalID: map[string]any{"Type": ResourceType, "Properties": props}},
		Outputs: map[string]any{"NamespaceId": map[string]any{
			"Description": "Opaque id of the namespace (the zael_namespace_id tag of its principals)",
			"Value":       map[string]any{"Fn::GetAtt": []any{logicalID, "NamespaceId"}},
		}},
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(tpl); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
