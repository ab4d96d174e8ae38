package apiproxy

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/sysuser"
)

func TestCheckUser(t *testing.T) {
	for _, c := range []struct {
		name string
		ids  sysuser.IDs
		err  string
	}{
		{"a uid of its own", sysuser.IDs{UID: 998, GID: 998}, ""},
		{"root", sysuser.IDs{UID: 0, GID: 998}, "root"},
		{"group root", sysuser.IDs{UID: 998, GID: 0}, "root"},
		{"the agent's uid", sysuser.IDs{UID: 1000, GID: 998}, "agent"},
		{"the sandboxes' uid", sysuser.IDs{UID: 65534, GID: 998}, "sandboxes"},
		{"the sandboxes' gid", sysuser.IDs{UID: 998, GID: 65534}, "sandboxes"},
		{"negative", sysuser.IDs{UID: -2, GID: 998}, "not ids"},
		{"-1 is not an id", sysuser.IDs{UID: -1, GID: 998}, "not ids"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkUser(c.ids, Others{AgentUID: 1000, SandboxUID: 65534, SandboxGID: 65534})
			if c.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, c.err)
		})
	}
}

// dropped is the status of a thread that dropped to 998:997.
const dropped = "Name:\tawf\nUid:\t998\t998\t998\t998\nGid:\t997\t997\t997\t997\nGroups:\t\n" +
	"CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n" +
	"CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"

func TestCheckStatus(t *testing.T) {
	ids := sysuser.IDs{UID: 998, GID: 997}
	for _, c := range []struct {
		name, status, err string
	}{
		{"dropped", dropped, ""},
		{"root saved uid", replace(dropped, "Uid:\t998\t998\t998\t998", "Uid:\t998\t998\t0\t998"), "Uid:"},
		{"root fs uid", replace(dropped, "Uid:\t998\t998\t998\t998", "Uid:\t998\t998\t998\t0"), "Uid:"},
		{"a group kept", replace(dropped, "Groups:\t", "Groups:\t0"), "Groups:"},
		{"a capability kept", replace(dropped, "CapEff:\t0000000000000000", "CapEff:\t0000000000000400"), "CapEff:"},
		{"ambient", replace(dropped, "CapAmb:\t0000000000000000", "CapAmb:\t0000000000000001"), "CapAmb:"},
		{"a line missing", replace(dropped, "CapPrm:\t0000000000000000\n", ""), "lines checked"},
		{"a line twice, another missing", replace(dropped, "CapAmb:\t0000000000000000\n", "CapEff:\t0000000000000000\n"), "lines checked"},
		{"empty", "", "lines checked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkStatus(c.status, ids)
			if c.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, c.err)
		})
	}
}

// replace replaces old, which must be there, in s.
func replace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("replace: " + old + " not in the status")
	}
	return strings.Replace(s, old, new, 1)
}

// FuzzCheckStatus checks that checkStatus never panics and accepts only a
// status whose checked lines are exactly the dropped ones.
func FuzzCheckStatus(f *testing.F) {
	f.Add(dropped)
	f.Fuzz(func(t *testing.T, status string) {
		ids := sysuser.IDs{UID: 998, GID: 997}
		if checkStatus(status, ids) != nil {
			return
		}
		assert.NoError(t, checkStatus(dropped, ids))
		assert.Contains(t, status, "998")
		assert.Contains(t, status, "997")
	})
}

// TestSetupMakesTheUser checks that the host setup script creates the user
// the proxy drops to, under UserName's name.
func TestSetupMakesTheUser(t *testing.T) {
	b, err := os.ReadFile("../../tests/setup/deps.sh")
	require.NoError(t, err)
	assert.Contains(t, string(b), "local u="+UserName+"\n")
}
