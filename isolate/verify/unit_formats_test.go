package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// formatsReport is a fake run with one FAIL (priv/ids), passes, and a
// required runtime that is BLOCKED.
func formatsReport(t *testing.T) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
		if name == "gvisor" {
			return nil, errors.New("gvisor: runsc not found")
		}
		return &fakeRuntime{name: name, respond: func(f *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome {
			if p.ID == "priv/ids" {
				return isolate.Outcome{Kind: isolate.KindNonzeroExit, Detail: "exit status 1", Stderr: []byte("Traceback <&>\n")}
			}
			return passing(f, p, s)
		}}, nil
	}
	rep, err := Run(ctx, Options{Runtimes: []string{"direct", "gvisor"}, Required: []string{"direct", "gvisor"}, RootFS: testRootFS,
		Probes: []string{"ctl/python", "priv/ids"}, Open: open, Environ: []string{}})
	require.NoError(t, err)
	return rep
}

// TestJUnitShape decodes the JUnit output with encoding/xml and checks the
// shape CI dashboards read: suites, counts that add up, a failure per FAIL
// and per case of a required BLOCKED runtime, and the pins as properties.
func TestJUnitShape(t *testing.T) {
	rep := formatsReport(t)
	var buf bytes.Buffer
	require.NoError(t, rep.Write(&buf, "junit"))
	require.True(t, strings.HasPrefix(buf.String(), xml.Header))
	var got struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Skipped  int      `xml:"skipped,attr"`
		Suites   []struct {
			Name       string `xml:"name,attr"`
			Tests      int    `xml:"tests,attr"`
			Failures   int    `xml:"failures,attr"`
			Properties []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
				} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &got))
	require.Len(t, got.Suites, 3, "host, direct, gvisor")
	assert.Equal(t, []string{"host", "runtime direct", "runtime gvisor"}, []string{got.Suites[0].Name, got.Suites[1].Name, got.Suites[2].Name})
	props := map[string]string{}
	for _, p := range got.Suites[0].Properties {
		props[p.Name] = p.Value
	}
	assert.Equal(t, rep.Pins.AWF, props["awf"])
	assert.Equal(t, rep.Pins.RootFS.Digest, props["rootfs_digest"])
	tests, failures := 0, 0
	for _, s := range got.Suites {
		assert.Len(t, s.Cases, s.Tests, s.Name)
		n := 0
		for _, c := range s.Cases {
			if c.Failure != nil {
				n++
			}
		}
		assert.Equal(t, s.Failures, n, s.Name)
		tests += s.Tests
		failures += s.Failures
	}
	assert.Equal(t, tests, got.Tests)
	assert.Equal(t, failures, got.Failures)
	var ids *struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
	}
	for _, c := range got.Suites[1].Cases {
		if c.Name == "priv/ids" {
			ids = c.Failure
			assert.Equal(t, "direct.privilege", c.Classname)
		}
	}
	require.NotNil(t, ids, "the FAIL is a failure")
	assert.Equal(t, "FAIL", ids.Type)
	assert.Contains(t, ids.Message, "Traceback <&>", "evidence survives XML escaping whole")
	assert.Equal(t, got.Suites[2].Tests, got.Suites[2].Failures, "every case of a required BLOCKED runtime fails")
}

// TestSARIFShape decodes the SARIF output with encoding/json and checks the
// 2.1.0 shape: version, schema, one run with a driver, rules that results
// point at by id and index, and exactly the failures as error results.
func TestSARIFShape(t *testing.T) {
	rep := formatsReport(t)
	var buf bytes.Buffer
	require.NoError(t, rep.Write(&buf, "sarif"))
	var got struct {
		Schema  string `json:"$schema"`
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name           string `json:"name"`
					Version        string `json:"version"`
					InformationURI string `json:"informationUri"`
					Rules          []struct {
						ID               string `json:"id"`
						ShortDescription struct {
							Text string `json:"text"`
						} `json:"shortDescription"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Invocations []struct {
				ExecutionSuccessful bool   `json:"executionSuccessful"`
				StartTimeUTC        string `json:"startTimeUtc"`
				EndTimeUTC          string `json:"endTimeUtc"`
			} `json:"invocations"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Message   struct {
					Text string `json:"text"`
				} `json:"message"`
				Properties map[string]string `json:"properties"`
			} `json:"results"`
			Properties Pins `json:"properties"`
		} `json:"runs"`
	}
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&got))
	assert.Equal(t, "2.1.0", got.Version)
	assert.Equal(t, SARIFSchema, got.Schema)
	require.Len(t, got.Runs, 1)
	run := got.Runs[0]
	assert.Equal(t, "awf isolate verify", run.Tool.Driver.Name)
	assert.NotEmpty(t, run.Tool.Driver.Version)
	require.Len(t, run.Invocations, 1)
	assert.Equal(t, rep.Started, run.Invocations[0].StartTimeUTC)
	assert.Equal(t, rep.Pins, run.Properties)
	errs := map[string]string{}
	for _, r := range run.Results {
		require.Less(t, r.RuleIndex, len(run.Tool.Driver.Rules))
		assert.Equal(t, r.RuleID, run.Tool.Driver.Rules[r.RuleIndex].ID)
		assert.NotEmpty(t, r.Message.Text)
		assert.Contains(t, []string{"error", "warning"}, r.Level)
		if r.Level == "error" {
			errs[r.RuleID] = r.Properties["runtime"]
		}
	}
	assert.Equal(t, "direct", errs["priv/ids"])
	assert.Equal(t, "gvisor", errs["runtime/gvisor"], "a required BLOCKED runtime is a finding")
	for _, r := range run.Tool.Driver.Rules {
		if r.ID == "priv/ids" {
			assert.NotEqual(t, "priv/ids", r.ShortDescription.Text, "rules carry the probe's title")
		}
	}
	for _, x := range rep.Runtimes[0].Results {
		if x.Status == Pass {
			_, found := errs[x.ID]
			assert.False(t, found, "PASS %s is not a result", x.ID)
		}
	}
	assert.Error(t, rep.Write(&buf, "yaml"))
}
