package host

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
)

// Agent is the unprivileged user the agent command runs as.
type Agent struct {
	UID  int
	GID  int
	Name string
	Home string
}

// ResolveAgent finds the agent user: the configured name or uid, else
// SUDO_UID/SUDO_GID. Root is refused.
func ResolveAgent(configured string, getenv func(string) string) (Agent, error) {
	var a Agent
	switch {
	case configured != "":
		u, err := lookup(configured)
		if err != nil {
			return a, fmt.Errorf("agent user %q: %w", configured, err)
		}
		a = u
	case getenv("SUDO_UID") != "":
		uid, err1 := strconv.Atoi(getenv("SUDO_UID"))
		gid, err2 := strconv.Atoi(getenv("SUDO_GID"))
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return a, errors.New("agent user: SUDO_UID/SUDO_GID are not numeric ids")
		}
		a = Agent{UID: uid, GID: gid, Home: "/"}
		if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			a.Name, a.Home = u.Username, u.HomeDir
		}
	default:
		return a, errors.New(`agent user: set "agent": {"user": NAME} in the config, or run awf through sudo so SUDO_UID is set`)
	}
	if a.UID == 0 {
		return a, errors.New("agent user: refusing to run the agent as root")
	}
	if a.GID == 0 {
		return a, errors.New("agent user: refusing to run the agent with group root")
	}
	return a, nil
}

func lookup(name string) (Agent, error) {
	var u *user.User
	var err error
	if _, numErr := strconv.Atoi(name); numErr == nil {
		u, err = user.LookupId(name)
		if err != nil {
			// A uid without a passwd entry runs with its own number as group.
			uid, _ := strconv.Atoi(name)
			return Agent{UID: uid, GID: uid, Home: "/"}, nil
		}
	} else {
		u, err = user.Lookup(name)
		if err != nil {
			return Agent{}, err
		}
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return Agent{}, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return Agent{}, err
	}
	return Agent{UID: uid, GID: gid, Name: u.Username, Home: u.HomeDir}, nil
}
