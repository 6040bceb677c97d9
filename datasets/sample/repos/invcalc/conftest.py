# Empty on purpose: makes the repository root the pytest rootdir so `import <package>` works from here.
