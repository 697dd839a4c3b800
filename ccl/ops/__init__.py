"""Operations: compiling for spark-submit, deploying on a cluster, the workspace of deployed
projects, and a local standalone cluster."""
