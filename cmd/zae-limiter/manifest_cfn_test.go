package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/zaelimiter/limiter/infra/provisioner"
)

// TestLimitsCfnTemplate prints the template of testdata/limits.yaml: it is
// provisioner.StackTemplate of the manifest's properties (the template
// infra's TestDeployProvisionerAndLimitsStack deploys on moto, with the
// provisioner's handler answering), and its properties are the
// manifest's in the original's PascalCase form.
func TestLimitsCfnTemplate(t *testing.T) {
	code, out, errs := runCLI("limits", "cfn-template", "-f", "testdata/limits.yaml", "--name", "my-app")
	require.Equal(t, 0, code, errs)

	m, err := loadManifest("testdata/limits.yaml", nil)
	require.NoError(t, err)
	want, err := provisioner.StackTemplate("my-app", "Limits", manifestProperties("my-app", m))
	require.NoError(t, err)
	assert.Equal(t, string(want), out)
	assert.Contains(t, out, "Description: zae-limiter limits of namespace tenant-a in my-app (Custom::ZaeLimiterLimits, served by my-app's provisioner)\n")

	var tpl struct {
		Resources map[string]struct {
			Type       string         `yaml:"Type"`
			Properties map[string]any `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &tpl))
	res := tpl.Resources["Limits"]
	assert.Equal(t, "Custom::ZaeLimiterLimits", res.Type)
	p := res.Properties
	assert.Equal(t, map[string]any{"Fn::ImportValue": "my-app-ProvisionerArn"}, p["ServiceToken"])
	assert.Equal(t, "my-app", p["TableName"])
	assert.Equal(t, "tenant-a", p["Namespace"])
	assert.Equal(t, map[string]any{"OnUnavailable": "allow", "Limits": map[string]any{
		"rpm": map[string]any{"Capacity": 1000, "RefillAmount": 1000, "RefillPeriod": 60}}}, p["System"])
	assert.Equal(t, map[string]any{"Capacity": 50, "RefillAmount": 25, "RefillPeriod": 30},
		p["Entities"].(map[string]any)["key-1"].(map[string]any)["Resources"].(map[string]any)["gpt-4"].(map[string]any)["Limits"].(map[string]any)["rpm"])

	// The file form, and a manifest that does not validate.
	path := filepath.Join(t.TempDir(), "limits-stack.yaml")
	code, _, errs = runCLI("limits", "cfn-template", "-f", "testdata/limits.yaml", "--name", "my-app", "--output", path)
	require.Equal(t, 0, code, errs)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, out, string(b))
	code, _, errs = runCLI("limits", "cfn-template", "--name", "my-app")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "--file is required")
}

// TestLimitsCfnTemplateTooLarge: a manifest with more changes than one run
// of the provisioner writes is printed with a warning on stderr naming the
// per-change cost and the function's timeout; one that fits has none.
func TestLimitsCfnTemplateTooLarge(t *testing.T) {
	write := func(entities int) string {
		var b strings.Builder
		b.WriteString("namespace: tenant-a\nentities:\n")
		for i := range entities {
			fmt.Fprintf(&b, "  key-%d: {resources: {gpt-4: {limits: {rpm: {capacity: 10}}}}}\n", i)
		}
		path := filepath.Join(t.TempDir(), "limits.yaml")
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	code, out, errs := runCLI("limits", "cfn-template", "-f", write(provisioner.MaxChanges+1), "--name", "my-app")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "key-0:")
	assert.Contains(t, errs, fmt.Sprintf("warning: the manifest declares %d changes; at about %s each", provisioner.MaxChanges+1, provisioner.ChangeCost))
	assert.Contains(t, errs, fmt.Sprintf("one run of the provisioner (timeout %s, writing stops %s before it) does about %d", provisioner.FunctionTimeout, provisioner.DefaultMargin, provisioner.MaxChanges))

	code, _, errs = runCLI("limits", "cfn-template", "-f", write(provisioner.MaxChanges), "--name", "my-app")
	require.Equal(t, 0, code, errs)
	assert.Empty(t, errs)
}
