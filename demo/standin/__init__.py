"""Deterministic stand-ins for model servers (OpenAI-compatible, on loopback): the fake judge and language model
of ``fake_openai`` and the fake reasoning model of ``fake_thinking``. The tests run against them (through
``tests/runs/fake_openai.py`` and ``tests/runs/fake_thinking.py``), and the demo (``manage.py demo``) starts the
reasoning one for the runs that fill the Fidelity and Evidence pages. None of them is a language model: the
pages name a subject model on a stand-in as such (``subjects.models.SubjectModel.is_stand_in``)."""
