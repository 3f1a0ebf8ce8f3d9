"""Who may do what on the cluster, and how the embedded broker proves who it is.

- `acls`: one principal per role, least-privilege rights declared over the Topology;
- `acls_apply`: make a cluster's ACLs (and the embedded broker's SCRAM users) match;
- `credentials`: the secure embedded broker's generated passwords, one file per role;
- `tls`: its private CA and broker certificate.

Modules are imported where used: `acls_apply` needs a Kafka admin client, `tls` the
cryptography package.
"""
